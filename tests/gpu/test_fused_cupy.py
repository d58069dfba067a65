"""The fused layer kernels through CuPy (NVRTC-compiled CUDA) equal the NumPy reference bit
for bit, as the emulated kernels do on the CPU (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from tests.kernels.kernel_cases import assert_same_bits, on_path

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


def _both(cp, run, *arrays):
    """run(*arrays) on the NumPy reference and on CuPy copies; every output has the same bits."""
    with on_path("reference"):
        expected = run(*arrays)
    actual = run(*(cp.asarray(a) if isinstance(a, np.ndarray) else a for a in arrays))
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if e is None or np.isscalar(e):
            assert a == e, i
        else:
            assert_same_bits(cp.asnumpy(a), e, f"output {i}")


@given(st.integers(1, 200), st.integers(1, 100), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**32 - 1))
def test_fused_kernels_on_the_gpu_give_the_references_bits(cp, rows: int, cols: int, dtype, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3).astype(dtype)
    g = rng.standard_normal((rows, cols)).astype(dtype)
    w, b = rng.standard_normal(cols).astype(dtype), rng.standard_normal(cols).astype(dtype)
    targets = rng.integers(0, cols, rows)
    targets[::3] = -100
    per_item = rng.standard_normal(rows).astype(dtype)
    ids = rng.integers(0, 7, rows)
    for approximate in K.GELU_FORMS:
        _both(cp, lambda x, g, a=approximate: (K.gelu_forward(x, a), K.gelu_backward(x, g, a)), x, g)

    def layer_norm(x, w, b, g):
        y, mean, rstd = K.layer_norm_forward(x, w, b)
        return (y, mean, rstd, *K.layer_norm_backward(x, w, mean, rstd, g))

    _both(cp, layer_norm, x, w, b, g)

    def cross_entropy(x, t, grad):
        losses, lse, count = K.cross_entropy_forward(x, t)
        return losses, lse, count, K.cross_entropy_backward(x, t, lse, grad)

    _both(cp, cross_entropy, x, targets, per_item)
    _both(cp, lambda i, g: (K.embedding_backward(i, g, 7),), ids, g)

"""What the ops ask of a backend beyond NumPy's array API: erf, and asarray that copies on request.

The CuPy half runs on a CUDA device only (skipped otherwise, see tests/conftest.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erf

import minitorch_accum as mta
from minitorch_accum.backend import NumpyBackend, backend_for
from minitorch_accum.nn import functional as F


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_numpy_erf_keeps_the_dtype(dtype: str) -> None:
    x = np.linspace(-3, 3, 7).astype(mta.backend.resolve_dtype(dtype))
    out = NumpyBackend().erf(x)
    assert out.dtype == x.dtype
    np.testing.assert_allclose(out.astype(np.float64), erf(x.astype(np.float64)), rtol=1e-2 if "16" in dtype else 1e-6)


def test_numpy_asarray_shares_unless_asked_to_copy() -> None:
    backend = NumpyBackend()
    a = np.ones(3)
    assert backend.asarray(a) is a and not np.shares_memory(backend.asarray(a, copy=True), a)


@pytest.mark.gpu
def test_cupy_erf_copies_and_the_new_ops_match_the_cpu() -> None:
    cuda = backend_for("cuda")
    x = cuda.asarray(np.linspace(-3, 3, 7))
    np.testing.assert_allclose(cuda.to_host(cuda.erf(x)), erf(np.linspace(-3, 3, 7)), rtol=1e-12)
    assert cuda.asarray(x) is x and cuda.asarray(x, copy=True) is not x
    rng = np.random.default_rng(0)
    values = [rng.normal(size=(2, 3, 4, 5)) for _ in range(3)]
    results = []
    for device in ("cpu", "cuda"):
        q, k, v = (mta.tensor(a, dtype="float64", device=device, requires_grad=True) for a in values)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True).gelu()
        top = out.max(dim=-1).values + out.var(dim=1).sum() + mta.tril(out).masked_fill(out > 1.0, 0.0).sum()
        grads = top.sum().backward()
        results.append([mta.Tensor(grads[t]).numpy() for t in (q, k, v)])
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

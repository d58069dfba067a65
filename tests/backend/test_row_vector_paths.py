"""Where the CPU backend sends a bias's add and its gradient's sum: the native row-vector kernels
when the arrays fit them, NumPy otherwise, with NumPy's bits either way; and the engine's
reduction of a broadcast gradient, which reaches them through ``Backend.sum_rows``."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
import minitorch_accum.kernels as K
from minitorch_accum.autodiff.engine import reduce_to_shape
from minitorch_accum.backend.numpy_backend import NumpyBackend

pytestmark = pytest.mark.skipif(not K.row_vector_available(), reason="needs the native module")


@pytest.fixture
def calls(monkeypatch):
    """How often each native kernel ran (the backend looks them up on the kernels module)."""
    seen = {"add_row_vector": 0, "sum_rows": 0}
    for name in seen:
        real = getattr(K, name)

        def spy(*args, _real=real, _name=name):
            seen[_name] += 1
            return _real(*args)
        monkeypatch.setattr(K, name, spy)
    return seen


def _spread(rng, shape, dtype=np.float32):
    return (rng.standard_normal(shape) * np.exp(3 * rng.standard_normal(shape))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(32, 32, 192), (1024, 64), (2, 3)])
def test_a_bias_over_a_product_runs_natively_with_numpys_bits(calls, dtype, shape) -> None:
    rng = np.random.default_rng(1)
    x, b = _spread(rng, shape, dtype), _spread(rng, shape[-1:], dtype)
    backend = NumpyBackend()
    got = backend.add(x, b)
    np.testing.assert_array_equal(got, x + b)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(backend.add(b, x), b + x)  # the vector first: the same sum
    assert calls["add_row_vector"] == 2


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.ones((4, 3), np.float32), np.ones((4, 3), np.float32)),  # no broadcast
        (np.ones((4, 3), np.float32), np.ones(3, np.float64)),  # dtypes differ: NumPy promotes
        (np.ones((4, 3), np.int64), np.ones(3, np.int64)),  # not a float
        (np.ones((3, 4), np.float32).T, np.ones(3, np.float32)),  # not C-contiguous
        (np.ones((4, 1), np.float32), np.ones(3, np.float32)),  # broadcast both ways
        (np.ones((1, 3), np.float32), np.ones(3, np.float32)),  # one row: nothing to broadcast over
        (np.ones(3, np.float32), np.ones(3, np.float32)),  # two vectors
        (np.ones((4, 3), np.float32), np.float32(2.0)),  # a scalar
    ],
)
def test_what_the_kernel_does_not_take_goes_to_numpy(calls, a, b) -> None:
    got = NumpyBackend().add(a, b)
    want = a + b
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert calls["add_row_vector"] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_rows_is_native_from_two_columns_and_numpys_below(calls, dtype) -> None:
    rng = np.random.default_rng(2)
    backend = NumpyBackend()
    wide = _spread(rng, (1024, 64), dtype)
    np.testing.assert_array_equal(backend.sum_rows(wide), wide.sum(axis=0))
    assert calls["sum_rows"] == 1
    # one column: NumPy sums it pairwise, which a row-by-row kernel would not match
    narrow = _spread(rng, (4096, 1), dtype)
    np.testing.assert_array_equal(backend.sum_rows(narrow), narrow.sum(axis=0))
    strided = _spread(rng, (64, 1024), dtype).T
    np.testing.assert_array_equal(backend.sum_rows(strided), strided.sum(axis=0))
    assert calls["sum_rows"] == 1


@pytest.mark.parametrize(
    ("grad_shape", "shape", "native"),
    [
        ((32, 32, 192), (192,), True),  # a bias of a 3-D product
        ((1024, 64), (64,), True),
        ((4, 5, 6, 7), (6, 7), True),  # leading axes only, two left
        ((32, 32, 192), (1, 192), False),  # a kept axis of one: NumPy's sum over (0, 1)
        ((8, 5), (8, 1), False),  # a trailing broadcast
        ((3000,), (), False),  # to a scalar: one column, NumPy's pairwise sum
        ((6, 4), (6, 4), False),  # nothing to reduce
    ],
)
def test_the_engine_reduces_a_broadcast_gradient_as_numpy_does(calls, grad_shape, shape, native) -> None:
    rng = np.random.default_rng(3)
    grad = _spread(rng, grad_shape)
    got = reduce_to_shape(NumpyBackend(), grad, shape)
    extra = len(grad_shape) - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1 and grad_shape[extra + i] != 1)
    want = grad.sum(axis=axes, keepdims=True).reshape(shape) if axes else grad
    assert got.shape == shape
    np.testing.assert_array_equal(got, want)
    assert calls["sum_rows"] == (1 if native else 0)


def test_a_linear_layers_bias_gradient_comes_from_the_row_sum(calls) -> None:
    """End to end: F.linear's bias is added by the GEMM itself (no pass of add_row_vector; the bits
    of the product then the addition) and its gradient takes the native row sum, NumPy's sum of the
    output gradient's rows, bit for bit."""
    rng = np.random.default_rng(4)
    layer = mta.nn.Linear(16, 8)
    x = mta.tensor(_spread(rng, (4, 5, 16)))
    out = layer(x)
    product = np.empty((20, 8), np.float32)  # one GEMM over every row, as the op runs it
    K.gemm(product, x.numpy().reshape(20, 16), False, layer.weight.numpy(), False, 1.0, 0.0)
    np.testing.assert_array_equal(out.numpy(), product.reshape(4, 5, 8) + layer.bias.numpy())
    seed = _spread(rng, (4, 5, 8))
    grads = out.backward(mta.tensor(seed))
    np.testing.assert_array_equal(np.asarray(grads[layer.bias]), seed.sum(axis=(0, 1)))
    assert calls["add_row_vector"] == 0 and calls["sum_rows"] == 1

"""Matrix products: 2-D, batched and with vector operands, against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, matmul_shapes
from tests.ops.helpers import leaf


@given(data=st.data())
def test_matmul_gradient_2d_and_batched(data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(matmul_shapes())
    a = leaf(data.draw(arrays(shape_a)))
    b = leaf(data.draw(arrays(shape_b)))
    gradcheck(lambda x, y: x @ y, [a, b])


def test_matmul_with_vectors() -> None:
    rng = np.random.default_rng(0)
    m, v = leaf(rng.normal(size=(3, 4))), leaf(rng.normal(size=4))
    gradcheck(lambda a, b: a @ b, [m, v])
    u = leaf(rng.normal(size=3))
    gradcheck(lambda a, b: a @ b, [u, m])
    gradcheck(lambda a, b: a @ b, [leaf(rng.normal(size=4)), v])


@given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 6), st.integers(1, 5), st.booleans(),
       st.integers(0, 2**32 - 1))
def test_stacked_times_matrix_is_numpys_matmul_and_its_gradient(batch: int, rows: int, inner: int, out: int,
                                                                 transposed: bool, seed: int) -> None:
    # (..., k) @ (k, n) runs as one 2-D GEMM over all rows; a non-contiguous left operand is copied
    import minitorch_accum as mta

    rng = np.random.default_rng(seed)
    a_values = rng.normal(size=(batch, inner, rows)).swapaxes(1, 2) if transposed else rng.normal(size=(batch, rows,
                                                                                                       inner))
    b_values = rng.normal(size=(inner, out))
    a, b = leaf(a_values), leaf(b_values)
    y = a @ b
    np.testing.assert_allclose(y.numpy(), np.matmul(a_values, b_values), rtol=1e-13, atol=1e-13)
    g = rng.normal(size=y.shape)
    grads = (y * mta.tensor(g, dtype="float64")).sum().backward()
    np.testing.assert_allclose(grads[a], g @ b_values.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads[b], np.einsum("bri,bro->io", a_values, g), rtol=1e-12, atol=1e-12)
    gradcheck(lambda x, w: x @ w, [leaf(np.ascontiguousarray(a_values[:, :2])), leaf(b_values)])


@pytest.mark.parametrize("weight", [(3, 0), (0, 3)], ids=["no-outputs", "no-inputs"])
@pytest.mark.parametrize("rows", [(2,), (2, 4)], ids=["2-D", "3-D"])
def test_an_empty_weight_has_empty_gradients_of_its_shapes(weight: tuple[int, int], rows: tuple[int, ...]) -> None:
    w = mta.tensor(np.ones(weight), dtype="float64", requires_grad=True)
    x = mta.tensor(np.ones((*rows, weight[0])), dtype="float64", requires_grad=True)
    grads = ((x @ w).sum() + (x * 2.0).sum()).backward()
    assert grads[w].shape == weight
    # nothing flows back through an empty product; the other term's gradient arrives whole
    np.testing.assert_array_equal(grads[x], np.full((*rows, weight[0]), 2.0))


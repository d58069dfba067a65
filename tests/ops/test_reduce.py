"""Reductions: gradients against finite differences, the max/min/argmax forms, var like PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitorch_accum as mta
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, axes_for, shapes
from tests.ops.helpers import leaf

REDUCTIONS = {
    "sum": lambda x, axis, keep: x.sum(axis, keep),
    "mean": lambda x, axis, keep: x.mean(axis, keep),
    "logsumexp": lambda x, axis, keep: x.logsumexp(axis, keep),
    "var": lambda x, axis, keep: x.var(axis, keepdims=keep),
    "var_biased": lambda x, axis, keep: x.var(axis, unbiased=False, keepdims=keep),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(data=st.data())
def test_reduction_gradient(name: str, data: st.DataObject) -> None:
    shape = data.draw(shapes())
    axis = data.draw(axes_for(shape))
    keepdims = data.draw(st.booleans())
    x = leaf(data.draw(arrays(shape)))
    gradcheck(lambda t: REDUCTIONS[name](t, axis, keepdims), [x])


@given(data=st.data())
def test_dim_and_keepdim_are_aliases_of_axis_and_keepdims(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    axis = data.draw(axes_for(shape))
    keep = data.draw(st.booleans())
    x = mta.tensor(data.draw(arrays(shape)), dtype="float64")
    for name in ("sum", "mean", "logsumexp", "var"):
        ours = getattr(x, name)(axis, keepdims=keep).numpy()
        theirs = getattr(x, name)(dim=axis, keepdim=keep).numpy()
        np.testing.assert_array_equal(ours, theirs)
    with pytest.raises(TypeError, match="sum: got both axis=0 and dim=1"):
        x.sum(0, dim=1)
    with pytest.raises(TypeError, match="mean: got keepdims=True and keepdim=False"):
        x.mean(keepdims=True, keepdim=False)


def test_var_matches_numpy_with_every_correction() -> None:
    values = np.random.default_rng(0).normal(size=(3, 5))
    x = mta.tensor(values, dtype="float64")
    np.testing.assert_allclose(x.var().item(), values.var(ddof=1), rtol=1e-14)
    np.testing.assert_allclose(x.var(1).numpy(), values.var(axis=1, ddof=1), rtol=1e-14)
    np.testing.assert_allclose(x.var(0, unbiased=False).numpy(), values.var(axis=0), rtol=1e-14)
    np.testing.assert_allclose(mta.var(x, dim=1, correction=2, keepdim=True).numpy(),
                               values.var(axis=1, ddof=2, keepdims=True), rtol=1e-14)
    with pytest.raises(TypeError, match="var: give unbiased or correction, not both"):
        x.var(unbiased=True, correction=1)


@given(data=st.data())
def test_max_and_min_gradients_with_distinct_values(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    axis = data.draw(axes_for(shape))
    keepdims = data.draw(st.booleans())
    values = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-2, 2, width=64), unique=True))
    assume(np.diff(np.sort(values.ravel())).min(initial=1.0) > 1e-3)
    gradcheck(lambda t: t.max(axis, keepdims), [leaf(values)])
    gradcheck(lambda t: t.min(axis, keepdims) * 2.0, [leaf(values)])


def test_max_ties_share_the_gradient() -> None:
    x = leaf(np.array([1.0, 3.0, 3.0]))
    grads = x.max().backward()
    np.testing.assert_allclose(grads[x], [0.0, 0.5, 0.5])
    grads = x.min(axis=0).backward()
    np.testing.assert_allclose(grads[x], [1.0, 0.0, 0.0])


def test_max_with_dim_returns_values_and_indices_the_pytorch_way() -> None:
    values = np.array([[1.0, 4.0, 4.0], [7.0, -1.0, 0.0]])
    x = leaf(values)
    top = x.max(dim=1)
    assert isinstance(top, mta.ValuesIndices)
    values_out, indices = top  # unpacks as torch.return_types.max
    np.testing.assert_array_equal(values_out.numpy(), [4.0, 7.0])
    assert indices.dtype == mta.int64 and indices.tolist() == [1, 0]
    # the gradient goes to the index taken (the first maximum), not shared as x.max(axis) shares it
    grads = (top.values * mta.tensor([1.0, 2.0], dtype="float64")).sum().backward()
    np.testing.assert_array_equal(grads[x], [[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]])
    low = x.min(dim=0, keepdim=True)
    assert low.values.shape == (1, 3) and low.indices.tolist() == [[0, 1, 1]]
    # today's NumPy/Burn form still returns the values alone
    np.testing.assert_array_equal(x.max(1).numpy(), [4.0, 7.0])
    np.testing.assert_array_equal(x.max(axis=1, keepdims=True).numpy(), [[4.0], [7.0]])
    with pytest.raises(TypeError, match=r"max: dim= \(PyTorch's form, returning values and indices\) takes one int"):
        x.max(dim=(0, 1))
    with pytest.raises(mta.OpError, match=r"max: cannot reduce an empty tensor of shape \(0,\)"):
        mta.zeros(0).max(dim=0)


def test_argmax_and_argmin() -> None:
    x = mta.tensor([[1.0, 5.0, 5.0], [9.0, 0.0, -3.0]])
    assert x.argmax().item() == 3 and x.argmin().item() == 5
    assert x.argmax(dim=1).tolist() == [1, 0] and mta.argmin(x, 0).tolist() == [0, 1, 1]
    assert x.argmax(1, keepdim=True).shape == (2, 1) and x.argmax(1).dtype == mta.int64
    assert not x.argmax().requires_grad
    assert mta.tensor(2.5).argmax().item() == 0


"""repeat, topk, std, clone and t: values, and gradients against central differences in float64.

Every output is weighted by distinct numbers before gradcheck sums it, so a gradient sent to the
wrong copy, the wrong index or the wrong element fails (a plain sum would hide it)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, axes_for, shapes
from tests.ops.helpers import leaf


def weighted(out: mta.Tensor) -> mta.Tensor:
    """``out`` times 1, 2, 3, ... in its own order."""
    return out * np.arange(1.0, 1.0 + out.size).reshape(out.shape)


@given(data=st.data())
def test_repeat_matches_numpy_tile_and_its_gradient_sums_the_copies(data: st.DataObject) -> None:
    shape = data.draw(shapes(max_dims=3, max_side=3))
    extra = data.draw(st.integers(0 if shape else 1, 2))
    repeats = tuple(data.draw(st.lists(st.integers(1, 3), min_size=len(shape) + extra, max_size=len(shape) + extra)))
    values = data.draw(arrays(shape))
    x = leaf(values)
    np.testing.assert_array_equal(x.repeat(*repeats).numpy(), np.tile(values, repeats))
    assert x.repeat(repeats).shape == np.tile(values, repeats).shape  # a tuple too
    gradcheck(lambda t: weighted(t.repeat(*repeats)), [x])


def test_repeat_refuses_too_few_counts_and_negative_ones() -> None:
    x = mta.zeros(2, 3)
    with pytest.raises(mta.OpError, match=r"repeat: 1 repeat count\(s\) \(2,\) for a tensor of 2 axes"):
        x.repeat(2)
    with pytest.raises(mta.OpError, match="repeat: repeat counts must be non-negative ints"):
        x.repeat(2, -1)
    assert x.repeat(0, 2).shape == (0, 6)
    with pytest.raises(TypeError, match="repeat: needs the repeat counts"):
        x.repeat()


@st.composite
def distinct_rows(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """An array whose values are all different (a tie has no derivative) and an axis of it."""
    shape = draw(shapes(min_dims=1, max_dims=3))
    count = int(np.prod(shape))
    values = np.array(draw(st.permutations(range(count)))).reshape(shape) * 0.37 - 1.0
    return values, draw(st.integers(-len(shape), len(shape) - 1))


@given(drawn=distinct_rows(), largest=st.booleans(), data=st.data())
def test_topk_takes_the_k_best_along_the_axis_with_their_gradient(drawn, largest: bool, data) -> None:
    values, axis = drawn
    k = data.draw(st.integers(0, values.shape[axis]))
    x = leaf(values)
    top = x.topk(k, axis, largest=largest)
    order = np.argsort(-values if largest else values, axis=axis, kind="stable")
    expected = np.take(order, np.arange(k), axis=axis)
    np.testing.assert_array_equal(top.indices.numpy(), expected)
    np.testing.assert_array_equal(top.values.numpy(), np.take_along_axis(values, expected, axis=axis))
    assert top.indices.dtype == mta.int64
    assert mta.topk(x, k, dim=axis, largest=largest).indices.tolist() == top.indices.tolist()
    gradcheck(lambda t: weighted(t.topk(k, dim=axis, largest=largest).values), [x])
    unsorted = x.topk(k, axis, largest=largest, sorted=False).indices.numpy()
    np.testing.assert_array_equal(unsorted, np.sort(expected, axis=axis))  # the same ones, in tensor order


def test_topk_ties_go_to_the_lower_index_and_nan_counts_as_largest() -> None:
    x = mta.tensor([1.0, 3.0, 3.0, float("nan"), 0.0])
    assert x.topk(3).indices.tolist() == [3, 1, 2]
    assert x.topk(2, largest=False).indices.tolist() == [4, 0]
    ints = mta.tensor(np.array([np.iinfo(np.int64).min, 5, 5, 0]))
    assert ints.topk(4).indices.tolist() == [1, 2, 3, 0]  # no negation: the smallest int64 does not overflow


def test_topk_errors_name_the_op() -> None:
    x = mta.zeros(2, 3)
    with pytest.raises(mta.OpError, match=r"topk: k=4 is out of range for axis 1 of length 3 \(shape \(2, 3\)\)"):
        x.topk(4)
    with pytest.raises(TypeError, match="topk: k must be an int, got float"):
        x.topk(1.0)
    with pytest.raises(mta.OpError, match="topk: needs a tensor of at least one axis"):
        mta.tensor(1.0).topk(1)


@given(data=st.data())
def test_std_is_the_root_of_the_unbiased_variance_with_its_gradient(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    axis = data.draw(axes_for(shape))
    keep = data.draw(st.booleans())
    values = data.draw(arrays(shape))
    x = leaf(values)
    axes = None if axis is None else axis
    count = values.size if axes is None else int(np.prod([shape[a] for a in np.atleast_1d(axes)]))
    assume(count > 1)
    spread = values.std(axis=axes, ddof=1, keepdims=keep)
    assume(np.all(spread > 1e-3))  # the root has no derivative where the spread is 0
    np.testing.assert_allclose(x.std(axis, keepdims=keep).numpy(), spread, rtol=1e-12)
    np.testing.assert_allclose(x.std(dim=axis, unbiased=False, keepdim=keep).numpy(),
                               values.std(axis=axes, keepdims=keep), rtol=1e-12)
    np.testing.assert_allclose(mta.std(x, axis, correction=0).numpy(), values.std(axis=axes), rtol=1e-12)
    gradcheck(lambda t: weighted(t.std(axis, keepdims=keep)), [x], atol=1e-5)


@given(data=st.data())
def test_clone_and_t_pass_the_gradient_unchanged(data: st.DataObject) -> None:
    shape = data.draw(shapes(max_dims=2))
    x = leaf(data.draw(arrays(shape)))
    gradcheck(lambda t: weighted(t.clone()), [x])
    gradcheck(lambda t: weighted(t.t()), [x])

"""Ops that move data: gradients against finite differences, and the PyTorch spellings
(view, flatten(start, end), unsqueeze/squeeze, expand, split/chunk, mT, gather, tril/triu)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, shapes
from tests.ops.helpers import leaf


@given(data=st.data())
def test_reshape_permute_transpose_gradients(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=2))
    x = leaf(data.draw(arrays(shape)))
    order = data.draw(st.permutations(range(len(shape))))
    weights = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(-1)
    gradcheck(lambda t: t.permute(*order).reshape(-1) * weights, [x])
    gradcheck(lambda t: t.transpose(0, -1) * 2.0, [x])
    gradcheck(lambda t: t.T.flatten() * weights, [x])
    gradcheck(lambda t: t.mT.view(-1) * weights, [x])


@given(data=st.data())
def test_flatten_unsqueeze_squeeze_expand_gradients(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    x = leaf(data.draw(arrays(shape)))
    start = data.draw(st.integers(0, len(shape) - 1))
    end = data.draw(st.integers(start, len(shape) - 1))
    gradcheck(lambda t: t.flatten(start, end) * 2.0, [x])
    at = data.draw(st.integers(-len(shape) - 1, len(shape)))
    gradcheck(lambda t: t.unsqueeze(at).squeeze() * 3.0, [x])
    gradcheck(lambda t: t.unsqueeze(0).expand(3, *([-1] * len(shape))) * 1.5, [x])


def test_shape_spellings_give_pytorchs_shapes() -> None:
    x = mta.zeros(2, 1, 3, 1)
    assert x.flatten().shape == (6,) and x.flatten(1).shape == (2, 3)
    assert x.flatten(start_dim=1, end_dim=2).shape == (2, 3, 1) and x.flatten(0, -2).shape == (6, 1)
    assert x.squeeze().shape == (2, 3) and x.squeeze(1).shape == (2, 3, 1) and x.squeeze(0).shape == x.shape
    assert x.squeeze(dim=(1, 3)).shape == (2, 3)
    assert x.unsqueeze(-1).shape == (2, 1, 3, 1, 1) and x.unsqueeze(dim=0).shape == (1, 2, 1, 3, 1)
    assert x.view(2, -1).shape == (2, 3) and x.view((3, 2)).shape == (3, 2)
    assert x.contiguous() is x
    assert x.expand(4, 2, 5, 3, -1).shape == (4, 2, 5, 3, 1)
    assert mta.zeros(2, 3, 4).mT.shape == (2, 4, 3)
    with pytest.raises(mta.OpError, match=r"flatten: start axis 2 comes after end axis 1 for shape"):
        x.flatten(2, 1)
    with pytest.raises(mta.OpError, match=r"expand: cannot expand shape \(2, 1, 3, 1\) to \(-1, 2, 1, 3, 1\)"):
        x.expand(-1, 2, 1, 3, 1)
    with pytest.raises(mta.OpError, match=r"broadcast_to: cannot broadcast shape \(2, 1, 3, 1\) to \(2, 2, 2, 1\)"):
        x.expand(2, 2, 2, 1)
    with pytest.raises(mta.OpError, match=r"mT: needs at least 2 axes, got shape \(3,\)"):
        _ = mta.zeros(3).mT
    with pytest.raises(TypeError, match="unsqueeze: needs the position of the new axis"):
        x.unsqueeze()


def test_split_and_chunk_the_pytorch_way() -> None:
    x = leaf(np.arange(14.0).reshape(2, 7))
    pieces = x.split(3, dim=1)
    assert [p.shape for p in pieces] == [(2, 3), (2, 3), (2, 1)]
    assert [p.shape for p in mta.split(x, [2, 5], dim=-1)] == [(2, 2), (2, 5)]
    assert [p.shape for p in x.chunk(3, 1)] == [(2, 3), (2, 3), (2, 1)]
    assert [p.shape for p in x.chunk(4, dim=0)] == [(1, 7), (1, 7)]  # fewer chunks, as PyTorch
    q, k, v = mta.zeros(2, 5, 12).split(4, dim=2)
    assert q.shape == k.shape == v.shape == (2, 5, 4)
    # each piece's gradient lands in its own columns
    grads = (pieces[0].sum() + pieces[2].sum() * 10.0).backward()
    np.testing.assert_array_equal(grads[x], [[1, 1, 1, 0, 0, 0, 10]] * 2)
    gradcheck(lambda t: mta.cat([b * float(i + 1) for i, b in enumerate(t.chunk(3, dim=1))], dim=1), [x])
    with pytest.raises(mta.OpError, match=r"split: sizes \(2, 2\) do not add up to 7, the length of axis 1"):
        x.split([2, 2], dim=1)
    with pytest.raises(mta.OpError, match="split: split size must be positive, got 0"):
        x.split(0)
    with pytest.raises(mta.OpError, match="chunk: chunks must be a positive int"):
        x.chunk(0)


def test_gather_gradient_adds_repeated_indices() -> None:
    x = leaf(np.arange(6.0).reshape(2, 3))
    index = mta.tensor(np.array([[2, 2], [0, 1]]))
    with pytest.raises(mta.OpError, match=r"gather: index of shape \(2, 2\) does not fit a tensor of shape \(2, 3\)"):
        x.gather(0, index)
    out = x.gather(1, index)
    np.testing.assert_array_equal(out.numpy(), [[2.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(out.sum().backward()[x], [[0, 0, 2], [1, 1, 0]])
    gradcheck(lambda t: t.gather(1, index) * 1.5, [x])
    with pytest.raises(TypeError, match="gather: index must be an integer tensor, got float32"):
        x.gather(1, mta.zeros(2, 2))


def test_tril_triu_and_their_gradients() -> None:
    values = np.arange(1.0, 13.0).reshape(3, 4)
    x = leaf(values)
    np.testing.assert_array_equal(mta.tril(x).numpy(), np.tril(values))
    np.testing.assert_array_equal(x.triu(1).numpy(), np.triu(values, 1))
    np.testing.assert_array_equal(x.tril(-1).numpy(), np.tril(values, -1))
    np.testing.assert_array_equal(mta.tril(mta.ones(3, 3, dtype=mta.bool)).numpy(), np.tri(3, dtype=bool))
    np.testing.assert_array_equal(x.tril().sum().backward()[x], np.tril(np.ones((3, 4))))
    gradcheck(lambda t: t.triu(-1) * 2.0, [leaf(np.random.default_rng(0).normal(size=(2, 3, 3)))])
    with pytest.raises(mta.OpError, match=r"tril: needs at least 2 axes, got shape \(3,\)"):
        mta.tril(mta.ones(3))


@given(data=st.data())
def test_getitem_slices_and_repeated_indices(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=2, max_dims=3, max_side=5))
    x = leaf(data.draw(arrays(shape)))
    rows = data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=6))
    gradcheck(lambda t: t[np.array(rows)] * 1.5, [x])  # repeated rows add up
    gradcheck(lambda t: t[1:, ::2] * 3.0 if shape[0] > 1 else t[:, ::2], [x])
    gradcheck(lambda t: t[..., -1], [x])


def test_getitem_boolean_mask_and_tensor_index() -> None:
    values = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
    x = leaf(values)
    gradcheck(lambda t: t[values > 0] * 2.0, [x])
    index = mta.tensor(np.array([1, 1, 0]))
    gradcheck(lambda t: t[index], [x])


@given(data=st.data())
def test_concatenate_and_stack_gradients(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = leaf(data.draw(arrays(shape)))
    other_shape = list(shape)
    other_shape[axis] = data.draw(st.integers(1, 3))
    b = leaf(data.draw(arrays(tuple(other_shape))))
    gradcheck(lambda p, q: mta.concatenate([p, q * 2.0], axis=axis), [a, b])
    gradcheck(lambda p, q: mta.cat([p, q * 2.0], dim=axis), [a, b])
    c = leaf(data.draw(arrays(shape)))
    new_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    gradcheck(lambda p, q: mta.stack([p, q * 3.0, p], axis=new_axis), [a, c])
    gradcheck(lambda p, q: mta.stack([p, q], dim=new_axis), [a, c])

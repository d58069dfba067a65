"""Every op's backward against central finite differences in float64, on hypothesis inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitorch_accum as mta
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, broadcastable_shapes, matmul_shapes, shapes


def leaf(values: np.ndarray) -> mta.Tensor:
    return mta.tensor(np.array(values, dtype=np.float64), dtype="float64", requires_grad=True)


UNARY = {
    "neg": (lambda x: -x, -2.0, 2.0),
    "exp": (lambda x: x.exp(), -2.0, 2.0),
    "log": (lambda x: x.log(), 0.2, 3.0),
    "sqrt": (lambda x: x.sqrt(), 0.2, 3.0),
    "tanh": (lambda x: x.tanh(), -2.0, 2.0),
    "sigmoid": (lambda x: x.sigmoid(), -4.0, 4.0),
    "gelu": (lambda x: x.gelu(), -3.0, 3.0),
    "pow_scalar": (lambda x: x**3, -2.0, 2.0),
    "pow_fractional": (lambda x: x**1.5, 0.2, 3.0),
    "rpow": (lambda x: 2.0**x, -2.0, 2.0),
    "scalar_arith": (lambda x: (3.0 - x) * 2.0 / 4.0 + 1.0, -2.0, 2.0),
    "rdiv": (lambda x: 1.0 / x, 0.5, 2.0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_op_gradient(name: str, data: st.DataObject) -> None:
    fn, low, high = UNARY[name]
    x = leaf(data.draw(arrays(data.draw(shapes()), low, high)))
    gradcheck(fn, [x])


@given(data=st.data())
def test_relu_gradient_away_from_the_kink(data: st.DataObject) -> None:
    values = data.draw(arrays(data.draw(shapes())))
    assume(np.all(np.abs(values) > 1e-3))
    gradcheck(lambda x: x.relu(), [leaf(values)])


BINARY = {
    "add": (lambda a, b: a + b, -2.0, 2.0),
    "sub": (lambda a, b: a - b, -2.0, 2.0),
    "mul": (lambda a, b: a * b, -2.0, 2.0),
    "div": (lambda a, b: a / b, 0.5, 2.0),
    "pow": (lambda a, b: a**b, 0.5, 2.0),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_op_gradient_with_broadcasting(name: str, data: st.DataObject) -> None:
    fn, low, high = BINARY[name]
    shape_a, shape_b = data.draw(broadcastable_shapes())
    a = leaf(data.draw(arrays(shape_a, low, high)))
    b = leaf(data.draw(arrays(shape_b, low, high)))
    gradcheck(fn, [a, b])


@given(data=st.data())
def test_maximum_gradient(data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(broadcastable_shapes())
    a_values = data.draw(arrays(shape_a))
    b_values = data.draw(arrays(shape_b))
    assume(np.all(np.abs(np.subtract(a_values, b_values)) > 1e-3))
    gradcheck(mta.maximum, [leaf(a_values), leaf(b_values)])


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


REDUCTIONS = {
    "sum": lambda x, axis, keep: x.sum(axis, keep),
    "mean": lambda x, axis, keep: x.mean(axis, keep),
    "logsumexp": lambda x, axis, keep: x.logsumexp(axis, keep),
}


@st.composite
def axis_for(draw: st.DrawFn, shape: tuple[int, ...]) -> int | tuple[int, ...] | None:
    if not shape or draw(st.booleans()):
        return None
    axes = draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                         unique_by=lambda a: a % len(shape)))
    return axes[0] if len(axes) == 1 else tuple(axes)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(data=st.data())
def test_reduction_gradient(name: str, data: st.DataObject) -> None:
    shape = data.draw(shapes())
    axis = data.draw(axis_for(shape))
    keepdims = data.draw(st.booleans())
    x = leaf(data.draw(arrays(shape)))
    gradcheck(lambda t: REDUCTIONS[name](t, axis, keepdims), [x])


@given(data=st.data())
def test_max_gradient_with_distinct_values(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    axis = data.draw(axis_for(shape))
    keepdims = data.draw(st.booleans())
    values = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-2, 2, width=64), unique=True))
    assume(np.diff(np.sort(values.ravel())).min(initial=1.0) > 1e-3)
    gradcheck(lambda t: t.max(axis, keepdims), [leaf(values)])


def test_max_ties_share_the_gradient() -> None:
    x = leaf(np.array([1.0, 3.0, 3.0]))
    grads = x.max().backward()
    np.testing.assert_allclose(grads[x], [0.0, 0.5, 0.5])


@given(data=st.data())
def test_reshape_permute_transpose_gradients(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=2))
    x = leaf(data.draw(arrays(shape)))
    order = data.draw(st.permutations(range(len(shape))))
    weights = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(-1)
    gradcheck(lambda t: t.permute(*order).reshape(-1) * weights, [x])
    gradcheck(lambda t: t.transpose(0, -1) * 2.0, [x])
    gradcheck(lambda t: t.T.flatten() * weights, [x])


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
    c = leaf(data.draw(arrays(shape)))
    new_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    gradcheck(lambda p, q: mta.stack([p, q * 3.0, p], axis=new_axis), [a, c])


@given(data=st.data())
def test_where_gradient(data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(broadcastable_shapes())
    a = leaf(data.draw(arrays(shape_a)))
    b = leaf(data.draw(arrays(shape_b)))
    cond_shape = np.broadcast_shapes(shape_a, shape_b)
    condition = data.draw(hnp.arrays(np.bool_, cond_shape))
    gradcheck(lambda p, q: mta.where(condition, p, q), [a, b])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@given(data=st.data())
def test_softmax_gradients(name: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = leaf(data.draw(arrays(shape)))
    weights = np.random.default_rng(1).normal(size=shape)
    gradcheck(lambda t: getattr(t, name)(axis) * weights, [x])


def test_softmax_is_stable_for_huge_logits() -> None:
    x = mta.tensor([[1000.0, 1001.0, -1000.0]], dtype="float32")
    np.testing.assert_allclose(x.softmax().numpy(), [[0.26894143, 0.7310586, 0.0]], rtol=1e-6)
    assert np.isfinite(x.log_softmax().numpy()[:, :2]).all()
    assert np.isfinite(x.logsumexp().item())


@given(data=st.data())
def test_layer_norm_gradient(data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1, max_dims=3, min_side=2))
    x = leaf(data.draw(arrays(shape)))
    d = shape[-1]
    w = leaf(data.draw(arrays((d,), 0.5, 1.5)))
    b = leaf(data.draw(arrays((d,))))
    weights = np.random.default_rng(2).normal(size=shape)
    assume(np.all(np.std(x.data, axis=-1) > 1e-2))
    gradcheck(lambda t, ww, bb: F.layer_norm(t, ww, bb) * weights, [x, w, b], atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (4, 2, 3)])
def test_batch_norm_gradient(training: bool, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    x = leaf(rng.normal(size=shape))
    c = shape[1]
    w, b = leaf(rng.uniform(0.5, 1.5, c)), leaf(rng.normal(size=c))
    weights = rng.normal(size=shape)

    def fn(t: mta.Tensor, ww: mta.Tensor, bb: mta.Tensor) -> mta.Tensor:
        # fresh statistics each call: finite differences must not see running-stat updates
        mean, var = np.zeros(c), np.ones(c)
        return F.batch_norm(t, ww, bb, mean + 0.1, var * 1.5, training=training) * weights

    gradcheck(fn, [x, w, b], atol=1e-5)


@given(data=st.data())
def test_embedding_gradient_with_repeated_ids(data: st.DataObject) -> None:
    rows, dim = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 4))
    weight = leaf(data.draw(arrays((rows, dim))))
    ids = np.array(data.draw(st.lists(st.integers(0, rows - 1), min_size=1, max_size=7)))
    ids = ids.reshape(-1, 1) if data.draw(st.booleans()) else ids
    scale = np.random.default_rng(4).normal(size=ids.shape + (dim,))
    gradcheck(lambda w: F.embedding(ids, w) * scale, [weight])


def test_dropout_gradient_uses_the_same_mask() -> None:
    x = leaf(np.random.default_rng(5).normal(size=(4, 6)))

    def fn(t: mta.Tensor) -> mta.Tensor:
        return F.dropout(t, 0.4, training=True, rng=np.random.default_rng(11)) * 1.7

    gradcheck(fn, [x])
    out = fn(x).numpy()
    kept = out != 0
    assert 0 < kept.sum() < out.size
    np.testing.assert_allclose(out[kept], (x.numpy() * 1.7 / 0.6)[kept])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradient_with_padding(reduction: str) -> None:
    rng = np.random.default_rng(6)
    logits = leaf(rng.normal(size=(3, 4, 5)))
    targets = rng.integers(0, 5, size=(3, 4))
    targets[0, 2:] = -100
    targets[2, 3] = -100
    gradcheck(lambda t: F.cross_entropy(t, targets, reduction=reduction), [logits])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_gradient(reduction: str) -> None:
    rng = np.random.default_rng(7)
    p, t = leaf(rng.normal(size=(4, 3))), leaf(rng.normal(size=(4, 3)))
    gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), [p, t])


def test_cast_gradient_returns_to_the_input_dtype() -> None:
    x = leaf(np.array([1.0, 2.0]))
    y = x.to(dtype="float32") * 3.0
    grads = y.sum().backward()
    assert grads[x].dtype == np.float64
    np.testing.assert_array_equal(grads[x], [3.0, 3.0])

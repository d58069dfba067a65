"""Elementwise ops: backward against central finite differences in float64, on hypothesis inputs,
plus the points where a derivative has a limit (pow at 0, abs and clamp at their kinks)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, broadcastable_shapes, shapes
from tests.ops.helpers import leaf

UNARY = {
    "neg": (lambda x: -x, -2.0, 2.0),
    "exp": (lambda x: x.exp(), -2.0, 2.0),
    "log": (lambda x: x.log(), 0.2, 3.0),
    "sqrt": (lambda x: x.sqrt(), 0.2, 3.0),
    "rsqrt": (lambda x: x.rsqrt(), 0.2, 3.0),
    "square": (lambda x: x.square(), -2.0, 2.0),
    "tanh": (lambda x: x.tanh(), -2.0, 2.0),
    "sigmoid": (lambda x: x.sigmoid(), -4.0, 4.0),
    "gelu": (lambda x: x.gelu(), -3.0, 3.0),
    "gelu_tanh": (lambda x: x.gelu(approximate="tanh"), -3.0, 3.0),
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


@pytest.mark.parametrize("name", ["relu", "abs", "clamp"])
@given(data=st.data())
def test_piecewise_gradient_away_from_the_kinks(name: str, data: st.DataObject) -> None:
    fn = {"relu": lambda x: x.relu(), "abs": abs, "clamp": lambda x: x.clamp(min=-0.5, max=1.0)}[name]
    values = data.draw(arrays(data.draw(shapes())))
    assume(np.all(np.abs(values) > 1e-3) and np.all(np.abs(values + 0.5) > 1e-3)
           and np.all(np.abs(values - 1.0) > 1e-3))
    gradcheck(fn, [leaf(values)])


def test_gelu_forms_match_their_formulas() -> None:
    from scipy.special import erf

    values = np.linspace(-4.0, 4.0, 17)
    x = mta.tensor(values, dtype="float64")
    exact = 0.5 * values * (1.0 + erf(values / np.sqrt(2.0)))
    tanh_form = 0.5 * values * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (values + 0.044715 * values**3)))
    # 0.5 x (1 + erf) carries erf's rounding (1 ulp of 1, ~1.1e-16) times |x| / 2 for either erf
    # (SciPy's or the fused kernel's): 2 ulps of 1 times max |x| = 4 bounds their difference
    np.testing.assert_allclose(x.gelu().numpy(), exact, rtol=1e-15, atol=4 * 2**-52)
    np.testing.assert_allclose(mta.gelu(x, approximate="tanh").numpy(), tanh_form, rtol=1e-15, atol=4 * 2**-52)
    # the two forms differ by up to ~5e-4 here: the default is the exact one, as PyTorch's
    assert np.abs(exact - tanh_form).max() > 1e-4
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh', got 'erf'"):
        x.gelu(approximate="erf")


def test_gelu_of_bfloat16_is_computed_through_float32() -> None:
    x = mta.tensor([-1.0, 0.5, 2.0], dtype="bfloat16")
    expected = mta.tensor([-1.0, 0.5, 2.0], dtype="float32").gelu().numpy()
    out = x.gelu()
    assert out.dtype == mta.bfloat16
    np.testing.assert_allclose(out.numpy().astype(np.float32), expected, rtol=1e-2)


def test_kinks_take_pytorchs_subgradient() -> None:
    x = leaf(np.array([-1.0, 0.0, 2.0, 3.0]))
    grads = (x.abs() + x.clamp(min=0.0, max=2.0) * 10.0).sum().backward()
    # |x|' = sign(x) (0 at 0); clamp passes the gradient at its bounds too
    np.testing.assert_array_equal(grads[x], [-1.0, 10.0, 11.0, 1.0])


def test_clamp_arguments_are_checked() -> None:
    x = mta.ones(2)
    np.testing.assert_array_equal(x.clamp(max=0.5).numpy(), [0.5, 0.5])
    with pytest.raises(mta.OpError, match="clamp: give min, max or both"):
        x.clamp()
    with pytest.raises(TypeError, match="clamp: min must be a number, got Tensor"):
        x.clamp(min=mta.zeros(2))




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


@pytest.mark.parametrize("op", [mta.maximum, mta.minimum])
@given(data=st.data())
def test_maximum_and_minimum_gradients(op: object, data: st.DataObject) -> None:
    shape_a, shape_b = data.draw(broadcastable_shapes())
    a_values = data.draw(arrays(shape_a))
    b_values = data.draw(arrays(shape_b))
    assume(np.all(np.abs(np.subtract(a_values, b_values)) > 1e-3))
    gradcheck(op, [leaf(a_values), leaf(b_values)])


def test_maximum_and_minimum_ties_share_the_gradient() -> None:
    a, b = leaf(np.array([1.0, 2.0, 3.0])), leaf(np.array([3.0, 2.0, 1.0]))
    grads = (mta.minimum(a, b) * 2.0 + a.max(b)).sum().backward()
    np.testing.assert_array_equal(grads[a], [2.0 + 0.0, 1.0 + 0.5, 0.0 + 1.0])
    np.testing.assert_array_equal(grads[b], [0.0 + 1.0, 1.0 + 0.5, 2.0 + 0.0])
    np.testing.assert_array_equal(a.min(b).numpy(), [1.0, 2.0, 1.0])


def test_pow_gradients_at_zero_are_zero_where_pytorchs_are() -> None:
    # x ** 0 at x = 0: 0 * 0^-1 would be nan; PyTorch's (and this) gradient is 0
    x = leaf(np.array([0.0, 2.0]))
    np.testing.assert_array_equal((x**0).sum().backward()[x], [0.0, 0.0])
    # a ** b at a = 0: d/da is 0 where b = 0, d/db is 0 where b >= 0 (0 * log 0)
    a = leaf(np.array([0.0, 0.0, 0.0, 2.0]))
    b = leaf(np.array([0.0, 1.0, 2.5, 0.0]))
    grads = (a**b).sum().backward()
    np.testing.assert_array_equal(grads[a], [0.0, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(grads[b], [0.0, 0.0, 0.0, np.log(2.0)])


def test_masked_fill_gradient_and_value() -> None:
    rng = np.random.default_rng(0)
    x = leaf(rng.normal(size=(2, 3, 4)))
    mask = rng.random((3, 4)) > 0.5
    out = x.masked_fill(mta.tensor(mask), -np.inf)
    assert np.all(out.numpy()[:, mask] == -np.inf)
    np.testing.assert_array_equal(out.numpy()[:, ~mask], x.numpy()[:, ~mask])
    gradcheck(lambda t: t.masked_fill(mask, 5.0) * 2.0, [x])
    grads = (out.masked_fill(mta.tensor(mask), 0.0) * 3.0).sum().backward()
    np.testing.assert_array_equal(grads[x], np.broadcast_to(np.where(mask, 0.0, 3.0), (2, 3, 4)))


def test_masked_fill_errors_name_the_problem() -> None:
    x = mta.zeros(2, 3)
    with pytest.raises(TypeError, match=r"mask must be a bool tensor, got bool .*== compares tensor identity"):
        x.masked_fill(x == 0, 1.0)
    with pytest.raises(TypeError, match="mask must be a bool tensor, got Tensor of dtype float32"):
        x.masked_fill(x, 1.0)
    with pytest.raises(mta.OpError, match=r"mask of shape \(4, 3\) does not broadcast to the tensor's shape \(2, 3\)"):
        x.masked_fill(mta.ones(4, 3, dtype="bool"), 1.0)
    with pytest.raises(mta.OpError, match=r"mask of shape \(3, 2, 3\) does not broadcast"):
        x.masked_fill(mta.ones(3, 2, 3, dtype="bool"), 1.0)
    with pytest.raises(TypeError, match=r"value 0\.5 does not fit a int64 tensor"):
        mta.zeros(2, dtype="int64").masked_fill(mta.ones(2, dtype="bool"), 0.5)


@given(data=st.data())
def test_where_gradient(data: st.DataObject) -> None:
    from hypothesis.extra import numpy as hnp

    shape_a, shape_b = data.draw(broadcastable_shapes())
    a = leaf(data.draw(arrays(shape_a)))
    b = leaf(data.draw(arrays(shape_b)))
    cond_shape = np.broadcast_shapes(shape_a, shape_b)
    condition = data.draw(hnp.arrays(np.bool_, cond_shape))
    gradcheck(lambda p, q: mta.where(condition, p, q), [a, b])


def test_cast_gradient_returns_to_the_input_dtype() -> None:
    x = leaf(np.array([1.0, 2.0]))
    y = x.to(dtype="float32") * 3.0
    grads = y.sum().backward()
    assert grads[x].dtype == np.float64
    np.testing.assert_array_equal(grads[x], [3.0, 3.0])

"""The Linear op: ``F.linear`` with a bias is one op, one GEMM that adds the bias in its last step,
and gives the bits the MatMul and Add ops gave (forward and every gradient), at any thread count;
inputs it cannot take go the two-op way, as before."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch_accum as mta
import minitorch_accum.nn.functional as F
from minitorch_accum import nn, ops
from minitorch_accum.accum import Accumulator
from minitorch_accum.backend.numpy_backend import NumpyBackend
from minitorch_accum.testing import gradcheck
from tests.ops.helpers import leaf


def _both_ways(x: np.ndarray, w: np.ndarray, b: np.ndarray, x_view: str = "") -> tuple[list, list, str]:
    """(outputs and gradients of F.linear, the same of x @ w + b, F.linear's op name)."""
    results = []
    for fused in (True, False):
        xt = mta.tensor(x, requires_grad=True)
        wt = mta.tensor(w, requires_grad=True)
        bt = mta.tensor(b, requires_grad=True)
        xin = xt.mT if x_view == "T" else xt
        y = F.linear(xin, wt, bt) if fused else xin @ wt + bt
        name = y._node.fn.__name__
        upstream = np.linspace(-1.5, 2.0, y.numel(), dtype=y.data.dtype).reshape(y.shape)
        grads = (y * mta.tensor(upstream)).sum().backward()
        results.append(([y.data, grads[xt], grads[wt], grads[bt]], name))
    (fused_arrays, fused_name), (plain_arrays, _) = results
    return fused_arrays, plain_arrays, fused_name


def _assert_same_bits(got: list, expected: list) -> None:
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g.view(np.uint8), e.view(np.uint8))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(15, 33, 45), (3, 5, 7, 16), (1, 1, 1), (2, 300, 64, 48)])
def test_linear_is_one_op_with_the_bits_of_matmul_then_add(shape: tuple, dtype: type, threads: int) -> None:
    mta.set_threads(threads)
    try:
        rng = np.random.default_rng(len(shape) * 100 + shape[-1])
        *lead, k, n = shape
        x = rng.standard_normal((*lead, k)).astype(dtype)
        w = rng.standard_normal((k, n)).astype(dtype)
        b = (rng.standard_normal(n) * 2.0 ** rng.integers(-10, 10, n)).astype(dtype)  # the bias's rounding shows
        fused, plain, name = _both_ways(x, w, b)
        assert name == "Linear"
        _assert_same_bits(fused, plain)
    finally:
        mta.set_threads(None)


def test_a_transposed_input_and_a_transposed_weight_take_the_same_path() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 9)).astype(np.float32)  # used as x.mT: (9, 20), not row-major
    w = rng.standard_normal((20, 12)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    fused, plain, name = _both_ways(x, w, b, x_view="T")
    assert name == "Linear"
    _assert_same_bits(fused, plain)
    # PyTorch's layout: the weight stored (out, in) and used transposed, as a tied head uses a table
    layer = nn.Linear(20, 12)
    layer.weight = nn.Parameter(mta.tensor(np.ascontiguousarray(w.T)))
    assert layer.weight_transposed
    layer.bias = nn.Parameter(mta.tensor(b))
    xt = mta.tensor(x.T.copy())
    np.testing.assert_array_equal(layer(xt).data, (xt @ layer.weight.mT + layer.bias).data)


def test_a_bias_viewed_from_a_larger_array_is_added_as_it_reads() -> None:
    rng = np.random.default_rng(4)
    x = mta.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    w = mta.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    big = mta.tensor(rng.standard_normal(8).astype(np.float32))
    b = big[::2]  # every other element: not contiguous
    y = F.linear(x, w, b)
    assert y._node is None or y._node.fn is ops.Linear
    np.testing.assert_array_equal(y.data, (x @ w + b).data)
    np.testing.assert_array_equal(NumpyBackend().linear(x.data, w.data, b.data), (x @ w + b).data)


@pytest.mark.parametrize("case", ["1-D input", "no bias", "bias of shape (1, out)", "bias a number", "float16",
                                  "bias of another dtype"])
def test_inputs_the_op_does_not_take_go_the_two_op_way(case: str) -> None:
    rng = np.random.default_rng(5)
    x = mta.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    w = mta.tensor(rng.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
    b: object = mta.tensor(rng.standard_normal(2).astype(np.float32), requires_grad=True)
    if case == "1-D input":
        x = x[0]
    elif case == "no bias":
        b = None
    elif case == "bias of shape (1, out)":
        b = b.reshape(1, 2)  # type: ignore[union-attr]
    elif case == "bias a number":
        b = 0.5
    elif case == "float16":
        x, w, b = (t.to(dtype="float16") for t in (x, w, b))  # type: ignore[union-attr]
    else:
        b = b.to(dtype="float64")  # type: ignore[union-attr]
        with pytest.raises(TypeError, match="dtype mismatch"):
            F.linear(x, w, b)
        return
    y = F.linear(x, w, b)
    assert y._node.fn is not ops.Linear
    expected = x @ w if b is None else x @ w + b
    np.testing.assert_array_equal(y.data, expected.data)


def test_the_op_passes_gradcheck_and_its_bias_gradient_sums_every_row() -> None:
    rng = np.random.default_rng(6)
    x, w, b = leaf(rng.normal(size=(2, 3, 4))), leaf(rng.normal(size=(4, 5))), leaf(rng.normal(size=5))
    gradcheck(lambda a, m, c: F.linear(a, m, c), [x, w, b])
    grads = F.linear(x, w, b).sum().backward()
    np.testing.assert_array_equal(grads[b], np.full(5, 6.0))  # 2 x 3 rows, each contributing 1


def test_a_bias_shared_by_two_layers_gets_both_gradients() -> None:
    rng = np.random.default_rng(7)
    x = mta.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    w1 = mta.tensor(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    w2 = mta.tensor(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    b = mta.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    fused = F.linear(F.linear(x, w1, b), w2, b).sum().backward()
    plain = ((x @ w1 + b) @ w2 + b).sum().backward()
    for t in (w1, w2, b):
        np.testing.assert_array_equal(fused[t], plain[t])


def test_only_the_gradients_asked_for_are_computed() -> None:
    rng = np.random.default_rng(8)
    x = mta.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    w = mta.tensor(rng.standard_normal((3, 2)).astype(np.float32))  # frozen
    b = mta.tensor(rng.standard_normal(2).astype(np.float32))       # frozen
    grads = F.linear(x, w, b).sum().backward()
    np.testing.assert_array_equal(grads[x], np.ones((4, 2), np.float32) @ w.data.T)
    assert w not in grads and b not in grads
    ctx = ops.Context(NumpyBackend(), (False, True, False))
    ctx.save(x.data, w.data)
    grad_x, grad_w, grad_b = ops.Linear.backward(ctx, np.ones((4, 2), np.float32))
    assert grad_x is None and grad_b is None and grad_w is not None
    assert ops.Linear.grad_factors(ctx, np.ones((4, 2), np.float32), 2) is None  # a sum of rows, no product


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 40), st.integers(1, 300), st.integers(1, 70), st.integers(0, 2**32 - 1))
def test_any_shape_gives_the_bits_of_matmul_then_add(lead: int, rows: int, k: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((lead, rows, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    fused, plain, _ = _both_ways(x, w, b)
    _assert_same_bits(fused, plain)


@pytest.mark.parametrize("fusion", ["gemm", "leaf", "none"])
def test_an_accumulated_window_of_linear_layers_is_the_two_op_window(fusion: str) -> None:
    """The accumulation layer fuses the weight's gradient into the arena from the Linear op as it
    did from the MatMul: k micro-batches give the bits of the two-op model's window."""
    rng = np.random.default_rng(9)
    data = rng.standard_normal((12, 6)).astype(np.float32)
    target = rng.standard_normal((12, 3)).astype(np.float32)
    layers = (rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32),
              rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32))
    results = []
    for fused in (True, False):
        params = [nn.Parameter(mta.tensor(p.copy())) for p in layers]
        model = nn.Module()
        for i, p in enumerate(params):
            setattr(model, f"p{i}", p)
        acc = Accumulator(model, steps=3, fusion=fusion)
        for i in range(3):
            xb, yb = mta.tensor(data[4 * i:4 * i + 4]), mta.tensor(target[4 * i:4 * i + 4])
            if fused:
                out = F.linear(F.gelu(F.linear(xb, params[0], params[1])), params[2], params[3])
            else:
                out = F.gelu(xb @ params[0] + params[1]) @ params[2] + params[3]
            acc.backward(((out - yb) ** 2).sum(), num_items=4)
        grads = acc.grads()
        results.append([np.array(grads[p], copy=True) for p in params])
    _assert_same_bits(*results)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_float32_bias_is_added_by_the_native_gemm_and_float64_by_the_add(monkeypatch, dtype: type) -> None:
    import minitorch_accum.kernels as K

    if not K.float32_gemm_available():
        pytest.skip("needs the native module")
    seen: dict[str, int] = {"gemm with a bias": 0, "add_row_vector": 0}
    real_gemm, real_add = K.gemm, K.add_row_vector

    def gemm(*args, bias=None, **kwargs):  # type: ignore[no-untyped-def]
        seen["gemm with a bias"] += bias is not None
        return real_gemm(*args, bias=bias, **kwargs)

    def add_row_vector(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen["add_row_vector"] += 1
        return real_add(*args, **kwargs)

    monkeypatch.setattr(K, "gemm", gemm)
    monkeypatch.setattr(K, "add_row_vector", add_row_vector)
    rng = np.random.default_rng(10)
    x, w, b = (mta.tensor(rng.standard_normal(s).astype(dtype)) for s in ((4, 6, 3), (3, 5), (5,)))
    y = F.linear(x, w, b)
    # float64's product is the BLAS's (native_gemm_for may be kernels.gemm there too); only float32's adds the bias
    assert seen == ({"gemm with a bias": 1, "add_row_vector": 0} if dtype == np.float32
                    else {"gemm with a bias": 0, "add_row_vector": 1})
    np.testing.assert_array_equal(y.data, (x @ w + b).data)


def test_the_weight_and_input_gradients_are_offered_as_gemm_factors() -> None:
    """The accumulation layer fuses a weight's gradient into the arena from these factors: None
    here would still give the right gradient, but through a product the arena then adds."""
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    grad = rng.standard_normal((2, 3, 5)).astype(np.float32)
    ctx = ops.Context(NumpyBackend(), (True, True, True))
    ctx.save(x, w)
    a, b = ops.Linear.grad_factors(ctx, grad, 1)
    np.testing.assert_array_equal(a @ b, x.reshape(6, 4).T @ grad.reshape(6, 5))
    assert ops.Linear.grad_factors(ctx, grad, 0) is None  # a 3-D input's gradient is no 2-D product
    ctx.save(x[0], w)
    a, b = ops.Linear.grad_factors(ctx, grad[0], 0)
    np.testing.assert_array_equal(a @ b, grad[0] @ w.T)


def test_a_weight_that_does_not_fit_is_refused_with_the_shape_it_needs_and_the_layout_hint() -> None:
    x = mta.tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ops.OpError, match=r"^linear: weight of shape \(5, 4\) does not fit input of shape \(2, 3, 4\): "
                                          r"it needs shape \(4, out\); weights here are \(in, out\) \(y = x @ W \+ b, "
                                          r"Burn's layout\): for a PyTorch-layout \(out, in\) weight such as an "
                                          r"Embedding's table write F\.linear\(x, weight\.mT\)$"):
        F.linear(x, mta.tensor(np.ones((5, 4), np.float32)))
    with pytest.raises(ops.OpError, match=r"^linear: weight of shape \(5, 6\) does not fit input of shape "
                                          r"\(2, 3, 4\): it needs shape \(4, out\)$"):  # no layout hint: 6 is not 4
        F.linear(x, mta.tensor(np.ones((5, 6), np.float32)))
    with pytest.raises(ops.OpError, match=r"it needs shape \(\?, out\)$"):
        F.linear(mta.tensor(np.float32(1.0)), mta.tensor(np.ones((5, 6), np.float32)))
    with pytest.raises(ops.OpError, match=r"weight of shape \(4,\)"):
        F.linear(x, mta.tensor(np.ones(4, np.float32)))

"""bf16 gradients into a float32 arena, and windows with a non-finite gradient are skipped."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator, DynamicLossScaler
from tests.accum.helpers import data, mlp, summed_loss, window_grads


def test_bf16_gradients_accumulate_into_float32_and_match_a_float32_reference() -> None:
    """bf16 keeps 8 significant bits (u = 2^-8 ~ 0.4%); forward and backward round at every
    op, a few ops deep, so elements may drift by a few percent of the gradient's scale.
    We allow 5% of the largest reference entry per tensor."""
    low = mlp("bfloat16")
    ref = mlp("float32")
    ref.load_record({k: v.astype(np.float32) for k, v in low.to_record().items()})
    x, y = data()
    x = x.astype(mta.bfloat16).astype(np.float64)  # both models see the same inputs
    acc_low = Accumulator(low, steps=3, fusion="leaf", trace=True)
    acc_ref = Accumulator(ref, steps=3)
    for i in range(3):
        part = slice(i * 9, (i + 1) * 9)
        acc_low.backward(summed_loss(low, x[part], y[part], "bfloat16"), num_items=9)
        acc_ref.backward(summed_loss(ref, x[part], y[part], "float32"), num_items=9)
    assert acc_low.arena.buffer.dtype == np.float32
    assert [e.kernel for e in acc_low.trace.for_param("0.weight")] == ["cast_copy_scale", "cast_add_scale",
                                                                       "cast_add_scale"]
    got, want = window_grads(acc_low, low), window_grads(acc_ref, ref)
    for name in want:
        assert np.max(np.abs(got[name] - want[name])) <= 0.05 * np.max(np.abs(want[name])), name


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
@pytest.mark.parametrize("bad_micro_batch", [0, 2])
def test_an_inf_in_one_micro_batch_skips_the_step_and_leaves_parameters_untouched(
        fusion: str, bad_micro_batch: int) -> None:
    model = mlp("float32")
    x, y = data()
    x[bad_micro_batch * 4 + 1, 2] = np.inf
    opt = optim.AdamW(lr=0.1)
    before = {n: p.numpy() for n, p in model.named_parameters()}
    acc = Accumulator(model, steps=3, fusion=fusion)
    for i in range(3):
        acc.backward(summed_loss(model, x[i * 4:(i + 1) * 4], y[i * 4:(i + 1) * 4], "float32"), num_items=4)
    assert acc.found_nonfinite()
    opt.step(model, acc)
    for name, param in model.named_parameters():
        np.testing.assert_array_equal(param.numpy(), before[name])  # bit-identical
    assert opt.skipped_steps == 1 and opt.step_count == 0 and not opt.state
    acc.zero()
    assert acc.skipped_windows == [0]
    # the next, clean window steps normally
    for i in range(3):
        acc.backward(summed_loss(model, x[12 + i * 4:16 + i * 4], y[12 + i * 4:16 + i * 4], "float32"), num_items=4)
    assert not acc.found_nonfinite()
    opt.step(model, acc)
    assert opt.step_count == 1


def test_loss_scaler_unscale_is_folded_and_overflow_lowers_the_scale() -> None:
    model = mlp("float32")
    reference = mlp("float32")
    x, y = data()
    scaler = DynamicLossScaler(init_scale=2.0**10, growth_interval=2)
    acc = Accumulator(model, steps=2, loss_scaler=scaler)
    plain = Accumulator(reference, steps=2)
    for i in range(2):
        part = slice(i * 5, (i + 1) * 5)
        acc.backward(summed_loss(model, x[part], y[part], "float32"), num_items=5)
        plain.backward(summed_loss(reference, x[part], y[part], "float32"), num_items=5)
    scaled, unscaled = window_grads(acc, model), window_grads(plain, reference)
    for name in scaled:  # power-of-two scaling is exact
        np.testing.assert_array_equal(scaled[name], unscaled[name])
    acc.zero()
    x[0, 0] = np.nan
    acc.backward(summed_loss(model, x[:5], y[:5], "float32"), num_items=5)
    acc.zero()
    assert scaler.scale == 2.0**9 and scaler.events[-1].old_scale == 2.0**10
    assert acc.skipped_windows == [1]


@pytest.mark.parametrize("magnitude, overflows", [(1e3, False), (1e38, True)])
def test_gemm_views_are_proven_finite_by_their_factors_or_checked(magnitude: float, overflows: bool) -> None:
    """The fused GEMM raises no flag; a bound from its factors' norms skips the end-of-window
    check when no overflow is possible, and forces it when one is (here 8 x 1e38 > float32 max). (A
    layer of 32 x 32 weights from 8 rows, whose factors are the smaller read: the bound is kept.)"""
    layer = nn.Linear(32, 32, bias=False)
    acc = Accumulator(layer, steps=1, fusion="gemm", trace=True)
    acc.backward(layer(mta.tensor(np.full((8, 32), magnitude), dtype="float32")).sum(), num_items=8)  # dW = x^T 1
    assert acc.found_nonfinite() is overflows
    checked = {e.param for e in acc.trace.events if e.kernel == "finite_check"}
    assert checked == ({"weight"} if overflows else set())


def test_a_scale_beyond_float16_range_skips_the_window_and_backs_off() -> None:
    model = mlp("float16")
    x, y = data()
    scaler = DynamicLossScaler(init_scale=2.0**16)  # 65536 > float16's 65504
    acc = Accumulator(model, steps=1, fusion="leaf", loss_scaler=scaler)
    acc.backward(summed_loss(model, x[:4], y[:4], "float16"), num_items=4)
    assert acc.found_nonfinite()
    acc.zero()
    assert scaler.scale == 2.0**15
    acc.backward(summed_loss(model, x[:4], y[:4], "float16"), num_items=4)
    assert not acc.found_nonfinite()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_gradient_that_turns_non_finite_after_the_first_micro_batch_is_found(dtype: str) -> None:
    """Later 16-bit contributions go through cast_add_scale, which must raise the flag too."""
    model = mlp(dtype)
    x, y = data()
    x[5, 1] = np.inf
    acc = Accumulator(model, steps=2, fusion="leaf")
    acc.backward(summed_loss(model, x[:4], y[:4], dtype), num_items=4)
    acc.backward(summed_loss(model, x[4:8], y[4:8], dtype), num_items=4)
    assert acc.found_nonfinite()


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
@pytest.mark.parametrize("init_scale", [0.5, 2.0, 2.0**10])
def test_a_power_of_two_loss_scale_leaves_the_window_gradient_exactly_as_unscaled(fusion: str,
                                                                                  init_scale: float) -> None:
    x, y = data()
    grads = []
    for scaler in (DynamicLossScaler(init_scale=init_scale), None):
        model = mlp("float32")
        acc = Accumulator(model, steps=2, fusion=fusion, loss_scaler=scaler)
        for rows in (slice(0, 5), slice(5, 12)):
            acc.backward(summed_loss(model, x[rows], y[rows], "float32"), num_items=len(y[rows]))
        grads.append(window_grads(acc, model))
    for name in grads[0]:
        np.testing.assert_array_equal(grads[0][name], grads[1][name])

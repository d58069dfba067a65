"""The derived bound never cries wolf where the true gradient cancels (an attention key bias, in
float64 and float32, window and optimizer steps), stays tight enough to catch the bugs, and a
NaN gap is never within it."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.testing import check_properties
from minitorch_accum.testing.bug_recipes import Float32Accumulator, MeanOfMicroBatchMeans, ScheduledPerMicroBatch
from minitorch_accum.testing.false_alarm_corpus import FAMILIES
from minitorch_accum.testing.parameter_bound import RowMagnitudes, Tolerance, Twin, parameter_walk_bound
from minitorch_accum.testing.property_results import FAILED, PASSED, PropertyResult
from minitorch_accum.testing.subject import Subject
from tests.testing.models import Residual, batch, summed_loss

ATTENTION = FAMILIES["attention_key_bias"]


def attention_batch() -> tuple[np.ndarray, np.ndarray]:
    return ATTENTION.batch(3, 13)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_an_attention_key_bias_whose_gradient_cancels_passes_every_property(dtype: str) -> None:
    """Issue 26 measured 'k.bias' differs by 1.388e-18 (tolerance 2.653e-32): per-row gradients are
    rounding noise there, so a bound built from them alone is 1e-31."""
    report = check_properties(ATTENTION.factory, ATTENTION.loss_fn, attention_batch(), splits=[(1, 4, 2, 6)],
                              dtype=dtype)
    assert all(r.status == PASSED for r in report.results), str(report)
    window = report["window_equals_full_batch"].worst["k.bias"]
    assert window.gap > 0  # the two sides really differ there
    # not vacuous: far below what a normalization bug moves (1e-3 of the gradient and more)
    assert window.tolerance < (1e-15 if dtype == "float64" else 1e-6)
    assert "second evaluation of every row" in report["window_equals_full_batch"].why


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_same_attention_model_still_catches_the_bugs(dtype: str) -> None:
    data = attention_batch()
    for recipe, name in ((MeanOfMicroBatchMeans(), "window_equals_full_batch"),
                         (ScheduledPerMicroBatch(), "steps_equal_big_batch")):
        report = check_properties(ATTENTION.factory, ATTENTION.loss_fn, data, splits=[(1, 4, 2, 6)], dtype=dtype,
                                  recipe=recipe, properties=[name], raise_on_failure=False)
        worst = report[name].worst_parameter()[1]
        assert report[name].status == FAILED and worst.ratio > 100, str(report)


def test_the_floor_is_each_rows_error_measured_by_a_second_evaluation() -> None:
    subject = Subject(ATTENTION.factory, ATTENTION.loss_fn, attention_batch(), "float64")
    twin_subject = Subject(ATTENTION.factory, ATTENTION.loss_fn, attention_batch(), "float32")
    model, twin = subject.build(), twin_subject.build()
    plain = RowMagnitudes.measure(model, lambda rows: subject.loss(model, rows), subject.rows)
    measured = RowMagnitudes.measure(model, lambda rows: subject.loss(model, rows), subject.rows,
                                     twin=Twin(twin, lambda rows: twin_subject.loss(twin, rows), "float32", 2.0**-29))
    assert plain.noise is None and measured.noise is not None
    assert np.all(measured.noise["k.bias"] > 0)
    without, with_floor = (parameter_walk_bound(m, 4, "float64").bounds["k.bias"] for m in (plain, measured))
    assert np.all(with_floor > 100 * without)
    assert np.all(with_floor < 1e-14)


def test_float32_adamw_steps_on_a_tiny_lm_pass_within_the_propagated_bound() -> None:
    """Issue 26: float32 AdamW, 'qkv.weight' differs by 1.634e-05 (tolerance 4.670e-06)."""
    lm = FAMILIES["tiny_lm_fused_qkv_tied"]
    report = check_properties(lm.factory, lm.loss_fn, lm.batch(5, 12), splits=[(3, 1, 5, 3)], dtype="float32",
                              properties=["steps_equal_big_batch"])
    result = report["steps_equal_big_batch"]
    assert result.status == PASSED and result.max_gap > 0
    assert "propagated through the" in result.why and "m / (sqrt(v) + eps)" in result.why
    scheduled = check_properties(lm.factory, lm.loss_fn, lm.batch(5, 12), splits=[(3, 1, 5, 3)], dtype="float32",
                                 properties=["steps_equal_big_batch"], recipe=ScheduledPerMicroBatch(),
                                 raise_on_failure=False)
    assert scheduled["steps_equal_big_batch"].status == FAILED


def test_the_museums_float32_accumulator_fails_the_steps_property() -> None:
    """A step tolerance loosened from sqrt(u) to u^(1/4) let this pass (issue 26, item 7)."""
    report = check_properties(Residual, summed_loss, batch(), splits=[(3, 1, 4, 4)], dtype="float64",
                              recipe=Float32Accumulator(), properties=["steps_equal_big_batch"],
                              raise_on_failure=False)
    result = report["steps_equal_big_batch"]
    assert result.status == FAILED and result.worst_parameter()[1].ratio > 1e3


def test_a_nan_gap_is_never_within_the_tolerance() -> None:
    expected = {"w": np.array([1.0, 2.0])}
    for bound in (np.array([1e-3, 1e-3]), np.array([np.nan, 1e-3]), np.array([np.inf, np.inf])):
        result = PropertyResult("p", "claim")
        result.compare({"w": np.array([np.nan, 2.0])}, expected, Tolerance({"w": bound}, "why"), "scenario")
        assert result.settle().status == FAILED and result.max_gap == np.inf
        assert result.worst["w"].gap == np.inf and result.worst["w"].ratio == np.inf
    nan_bound = PropertyResult("p", "claim")
    nan_bound.compare({"w": np.array([1.0, 2.0 + 1e-9])}, expected, Tolerance({"w": np.full(2, np.nan)}, "why"), "s")
    assert nan_bound.settle().status == FAILED


def test_a_model_whose_gradient_is_nan_for_one_row_micro_batches_does_not_pass() -> None:
    def nan_alone(output: object, targets: np.ndarray) -> tuple:
        loss, items = summed_loss(output, targets)
        return loss * (np.nan if len(targets) == 1 else 1.0), items

    report = check_properties(Residual, nan_alone, batch(), splits=[(1, 11), (6, 6)],
                              properties=["window_equals_full_batch"], raise_on_failure=False)
    result = report["window_equals_full_batch"]
    assert not report.passed and result.status == FAILED and result.max_gap == np.inf
    assert "split (1, 11)" in result.worst_parameter()[1].scenario
    assert report.notes == ["a row's gradient is not finite when the row is a micro-batch of its own; every "
                            "comparison with such a window fails"]


@pytest.mark.parametrize(("loss", "reduction"), [(summed_loss, "items"), (summed_loss, "sum"),
                                                 ("one_more", "items")])
def test_the_bound_at_moved_parameters_is_the_bound_of_those_rows_measured_alone(loss: object, reduction: str) -> None:
    from minitorch_accum.testing import Recipe
    from minitorch_accum.testing.check_context import CheckContext

    if loss == "one_more":
        def loss(output: object, targets: np.ndarray) -> tuple:  # a miscount: the check counts the items itself
            value, _ = summed_loss(output, targets)
            return value, len(targets) + 1

    x, y = batch()
    whole = CheckContext(Subject(Residual, loss, (x, y), "float64"), ((3, 1, 4, 4),), Recipe(reduction=reduction))
    alone = CheckContext(Subject(Residual, loss, (x[4:], y[4:]), "float64"), ((4, 4),), Recipe(reduction=reduction))
    model = whole.subject.build()
    moved = whole.bound_at(model, np.arange(4, 12), 2)
    expected = alone.tolerance(2)
    assert moved.why == expected.why and "second evaluation of every row in float32" in moved.why
    for name, bound in expected.bounds.items():
        np.testing.assert_array_equal(moved.bounds[name], bound)


def test_the_step_tolerance_is_twice_the_spread_plus_each_steps_own_rounding() -> None:
    from minitorch_accum import nn
    from minitorch_accum.testing.training_properties import STEP_ROUNDINGS, _propagated_tolerance

    def holding(*values: float) -> nn.Module:
        layer = nn.Linear(1, 3, bias=False, dtype="float64")
        layer.weight.data[...] = np.array([values])
        return layer

    final, plus, minus = holding(0.5, -0.25, 0.0), holding(0.5 + 1e-6, -0.25, 0.0), holding(0.5, -0.25 - 3e-6, 0.0)
    initial = {"weight": np.array([[0.25, -1.0, 2.0]])}  # the third: no spread, no path, only 4 steps u |p|
    path = {"weight": np.array([[0.5, 0.75, 0.0]])}
    u = 2.0**-53
    bounds = _propagated_tolerance(initial, [final, plus, minus], "float64", 3, path).bounds["weight"]
    expected = (2.0 * np.array([[1e-6, 3e-6, 0.0]]) + 4.0 * 3 * u * np.array([[0.5, 1.0, 2.0]])
                + STEP_ROUNDINGS * u * path["weight"])
    np.testing.assert_allclose(bounds, expected, rtol=1e-9, atol=0)
    assert STEP_ROUNDINGS == 16
    assert _propagated_tolerance(initial, [final, plus, minus], "float64", 3, path).why == (
        "the rounding bound propagated through the 3 optimizer steps (float64): twice the spread of the big-batch run "
        "when every window's gradient is moved by +- (its rounding bound at the step's parameters + 16 u |g| for the "
        "step's own roundings) and every parameter by -+ 2 u |p| after each step, plus each step's own rounding as it "
        "stands (4 u |p| + 16 u |p_t - p_(t-1)|); the runs carry the moved gradients through the optimizer (Adam's "
        "m / (sqrt(v) + eps), the decay, the momentum) and the moved parameters into the next window's gradient")


def test_the_window_bound_is_the_documented_formula_for_each_reduction_and_with_a_noise_floor() -> None:
    from minitorch_accum.testing.parameter_bound import NOISE_FACTOR

    u = 2.0**-53
    # "e": a parameter with no entries (a zero-width layer) gets an empty bound, no crash
    abs_sum, sum_abs = {"w": np.array([3.0, 0.5]), "e": np.zeros(0)}, {"w": np.array([1.0, 0.0]), "e": np.zeros(0)}
    measured = RowMagnitudes(abs_sum, sum_abs, items=4, rows=3, fan=2,
                             noise={"w": np.array([1e-14, 2e-14]), "e": np.zeros(0)}, noise_source="a float32 twin")
    gamma = 6 * u / (1 - 6 * u)  # n = max(items, rows) + fan terms
    tolerance = parameter_walk_bound(measured, 5, "float64")
    expected = ((2 * gamma + 5 * u) * abs_sum["w"] + u * sum_abs["w"]) / 4 + NOISE_FACTOR * 2e-14 / 4
    np.testing.assert_allclose(tolerance.bounds["w"], expected, rtol=1e-12, atol=0)
    assert tolerance.bounds["e"].shape == (0,)
    assert tolerance.why == (
        "rounding bound for float64 (u = 2^-53) and k = 5: (2 gamma_6 + k u) sum_r |g_r| / N + u |G| / N "
        "elementwise, gamma_n = n u / (1 - n u), over T = 4 terms summed plus F = 2 (every parameter's leading "
        "dimension: the dot-product lengths a first-order error can cross), N = 4 items; per-row gradients g_r "
        "measured by 3 backward passes; plus 4 max_entries sum_r e_r / N per parameter, e_r each row's rounding "
        "error measured by a float32 twin (the terms that cancel inside a row, as a key bias's through softmax, err "
        "although their sum is 0)")
    # a summed loss is not divided by its items; one item divides by 1
    summed = parameter_walk_bound(measured, 5, "float64", "sum").bounds["w"]
    np.testing.assert_allclose(summed, expected * 4, rtol=1e-12, atol=0)
    one = RowMagnitudes(abs_sum, sum_abs, items=1, rows=3, fan=2, noise_source="no twin in bfloat16")
    alone = parameter_walk_bound(one, 5, "float64")
    gamma = 5 * u / (1 - 5 * u)  # n = max(1, 3) + 2
    np.testing.assert_allclose(alone.bounds["w"], (2 * gamma + 5 * u) * abs_sum["w"] + u * sum_abs["w"], rtol=1e-12)
    assert alone.why.startswith("rounding bound for float64 (u = 2^-53) and k = 5: ")
    assert alone.why.endswith("; per-row gradients g_r measured by 3 backward passes; no floor for terms that "
                              "cancel inside a row: no twin in bfloat16")
    with pytest.raises(ValueError) as unknown:
        parameter_walk_bound(one, 5, "int8")
    assert str(unknown.value) == "rounding bound: no unit roundoff for dtype 'int8'; known: float64, float32, " \
        "float16, bfloat16"


def test_rtol_replaces_the_derived_bound_in_the_steps_too() -> None:
    loose = check_properties(Residual, summed_loss, batch(), splits=[(3, 1, 4, 4)], rtol=1e6,
                             recipe=ScheduledPerMicroBatch(), properties=["steps_equal_big_batch"])
    assert loose.passed
    strict = check_properties(Residual, summed_loss, batch(), splits=[(3, 1, 4, 4)], rtol=1e-3,
                              recipe=ScheduledPerMicroBatch(), properties=["steps_equal_big_batch"],
                              raise_on_failure=False)
    assert strict["steps_equal_big_batch"].status == FAILED


def test_the_perturbed_runs_step_every_window_and_move_the_opposite_ways() -> None:
    from minitorch_accum.optim import SGD
    from minitorch_accum.testing import Recipe
    from minitorch_accum.testing.check_context import CheckContext, parts_of
    from minitorch_accum.testing.training_properties import _plain_runs

    trace: list[dict[str, np.ndarray]] = []

    class Traced(SGD):
        def step(self, model: object, grads: object, lr: float | None = None) -> object:
            out = super().step(model, grads, lr=lr)
            if model is runs[0]:
                trace.append({n: np.asarray(p.numpy(), dtype=np.float64) for n, p in model.named_parameters()})
            return out

    ctx = CheckContext(Subject(Residual, summed_loss, batch(), "float64"), ((3, 1, 4, 4),), Recipe())
    runs = ctx.subject.build_identical(3)
    start = {n: np.asarray(p.numpy(), dtype=np.float64) for n, p in runs[0].named_parameters()}
    steps, path = _plain_runs(ctx, runs, lambda: Traced(0.1), parts_of((3, 1, 4, 4)), 2)
    assert steps == len(trace) == 2 * ctx.epochs
    for name in start:
        walked = sum(np.abs(b[name] - a[name]) for a, b in zip([start, *trace], trace, strict=False))
        np.testing.assert_allclose(path[name], walked, rtol=1e-12, atol=0)
    final, plus, minus = ({n: np.asarray(p.numpy(), dtype=np.float64) for n, p in r.named_parameters()} for r in runs)
    for name, value in final.items():
        up, down = plus[name] - value, minus[name] - value
        assert np.all(up * down <= 0) and np.mean(up < 0) > 0.9 and np.mean(down > 0) > 0.9, name


def test_the_loops_tolerance_is_sqrt_u_of_each_parameters_largest_move() -> None:
    from minitorch_accum.testing.training_properties import displacement_tolerance

    initial = {"w": np.array([1.0, -2.0, 3.0]), "b": np.array([0.5]), "none": np.zeros((0, 4))}
    final = {"w": np.array([1.25, -2.5, 3.0]), "b": np.array([0.5]), "none": np.zeros((0, 4))}
    tolerance = displacement_tolerance(initial, final, "float32", 6)
    assert {name: float(b) for name, b in tolerance.bounds.items()} == {"w": 2.0**-12 * 0.5, "b": 0.0, "none": 0.0}
    assert tolerance.why == (
        "sqrt(u) = 2.44e-04 (float32) of each parameter's largest movement over the 6 steps: the two runs' gradients "
        "agree to the rounding bound, and N optimizer steps amplify that (Adam up to 1/eps where a gradient is near "
        "zero), so half the digits are asked for; rounding leaves far less, every bug of the museum far more")


def test_rtol_must_be_positive_and_bounds_an_empty_parameter_by_zero() -> None:
    from minitorch_accum.testing.parameter_bound import relative_tolerance

    for bad in (0, 0.0, -1e-3):
        with pytest.raises(ValueError) as caught:
            relative_tolerance(bad, {"w": np.ones(2)})
        assert str(caught.value) == f"rtol must be positive, got {bad!r}"
    tolerance = relative_tolerance(0.5, {"w": np.array([1.0, -4.0]), "none": np.zeros(0)})
    assert {name: float(b) for name, b in tolerance.bounds.items()} == {"w": 2.0, "none": 0.0}
    assert tolerance.why == ("rtol = 0.5 given by the caller: rtol x max |full-batch gradient| of each parameter "
                             "(not derived; pass rtol=None for the rounding bound)")


def test_gamma_is_n_u_over_one_minus_n_u_where_u_is_large_enough_to_tell() -> None:
    u = 2.0**-8  # bfloat16: gamma_n's denominator shows at n u = 6 / 256
    measured = RowMagnitudes({"w": np.array([1.0])}, {"w": np.array([0.0])}, items=4, rows=4, fan=2)
    bound = parameter_walk_bound(measured, 1, "bfloat16", "sum").bounds["w"]
    assert float(bound[0]) == 2 * (6 * u / (1 - 6 * u)) + u


def test_f_counts_each_parameters_leading_dimension_and_one_for_a_scalar() -> None:
    from minitorch_accum import nn
    from minitorch_accum.testing.parameter_bound import leading_dimension_sum

    class ScaledLinear(nn.Module):
        def __init__(self) -> None:
            self.scale = nn.Parameter(np.array(2.0))
            self.layer = nn.Linear(4, 3)  # weight (4, 3), bias (3,)

    assert leading_dimension_sum(ScaledLinear()) == 1 + 4 + 3


def test_a_compare_keeps_the_highest_ratio_and_the_largest_gap_of_every_scenario() -> None:
    result = PropertyResult("p", "claim")
    exact = {"w": np.zeros(1), "none": np.zeros(0)}
    result.compare({"w": np.array([2.0]), "none": np.zeros(0)}, exact,
                   Tolerance({"w": np.array(1.0), "none": np.array(1.0)}, "first"), "over")
    result.compare({"w": np.array([5.0]), "none": np.zeros(0)}, exact,
                   Tolerance({"w": np.array(10.0), "none": np.array(1.0)}, "second"), "larger gap, within")
    worst = result.worst["w"]
    assert (worst.ratio, worst.gap, worst.scenario, worst.why, worst.max_gap) == (2.0, 2.0, "over", "first", 5.0)
    assert result.worst["none"].max_gap == 0.0
    later = PropertyResult("q", "claim")
    later.compare({"w": np.array([5.0])}, {"w": np.zeros(1)}, Tolerance({"w": np.array(10.0)}, "first"), "within")
    later.compare({"w": np.array([3.0])}, {"w": np.zeros(1)}, Tolerance({"w": np.array(1.0)}, "second"), "over")
    assert (later.worst["w"].scenario, later.worst["w"].max_gap) == ("over", 5.0)


def test_a_gap_equal_to_its_tolerance_passes_and_one_and_a_half_times_it_fails() -> None:
    for gap, status in ((1.0, PASSED), (1.5, FAILED)):
        result = PropertyResult("p", "claim")
        result.compare({"w": np.array([gap])}, {"w": np.zeros(1)}, Tolerance({"w": np.array(1.0)}, "why"), "s")
        assert result.settle().status == status, gap


class UnusedParameter(Residual):
    """A head the forward never uses: no gradient reaches it, in either precision."""

    def __init__(self) -> None:
        super().__init__()
        from minitorch_accum import nn

        self.unused = nn.Linear(3, 2)


class Float64Only(Residual):
    def forward(self, x: object) -> object:
        if x.dtype != np.float64:
            raise ValueError("this model runs in float64 only")
        return super().forward(x)


def test_an_unused_parameter_is_measured_as_zero_and_a_twin_that_fails_is_said() -> None:
    check_properties(UnusedParameter, summed_loss, batch(4), splits=[(1, 3)], dtype="float64",
                     properties=["window_equals_full_batch"])
    report = check_properties(Float64Only, summed_loss, batch(4), splits=[(1, 3)], dtype="float64",
                              properties=["window_equals_full_batch"])
    assert report.results[0].why.endswith("; no floor for terms that cancel inside a row: the second evaluation in "
                                          "float32 failed (ValueError: this model runs in float64 only)")


def test_the_twins_scale_is_one_below_float64_and_u64_over_u32_for_a_float64_check() -> None:
    from minitorch_accum.testing import Recipe
    from minitorch_accum.testing.check_context import CheckContext

    for dtype, other, scale in (("float32", "float64", 1.0), ("float64", "float32", 2.0**-29)):
        ctx = CheckContext(Subject(Residual, summed_loss, batch(4), dtype), ((1, 3),), Recipe())
        twin = ctx._twin(ctx.subject.build())
        assert (twin.dtype, twin.scale) == (other, scale)


class NoFloat64(Residual):
    def to(self, *args: object, device: object = None, dtype: object = None) -> object:
        if dtype == "float64":
            raise ValueError("no float64 here")
        return super().to(*args, device=device, dtype=dtype)


def test_a_model_that_cannot_be_built_in_the_twins_precision_is_checked_without_a_floor_and_says_so() -> None:
    report = check_properties(NoFloat64, summed_loss, batch(4), splits=[(1, 3)], dtype="float32",
                              properties=["window_equals_full_batch"])
    assert report.results[0].why.endswith("; no floor for terms that cancel inside a row: no second evaluation in "
                                          "float64 (ValueError: no float64 here)")


def test_a_loss_that_is_nan_fails_the_check_and_does_not_crash_it() -> None:
    def always_nan(output: object, targets: np.ndarray) -> tuple:
        loss, items = summed_loss(output, targets)
        return loss * np.nan, items

    report = check_properties(Residual, always_nan, batch(4), splits=[(1, 3)], properties=["window_equals_full_batch"],
                              raise_on_failure=False)
    assert report.results[0].status == FAILED and report.results[0].error is None


def test_the_perturbed_runs_move_each_window_by_its_bound_and_each_parameter_by_two_u(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from minitorch_accum.optim import SGD
    from minitorch_accum.optim.lr_scheduler import StepLR
    from minitorch_accum.testing import Recipe
    from minitorch_accum.testing.check_context import CheckContext, parts_of
    from minitorch_accum.testing.parameter_bound import UNIT_ROUNDOFF
    from minitorch_accum.testing.training_properties import STEP_ROUNDINGS, _plain_runs

    u = 2.0**-20  # a unit roundoff far above float64's own, so that the moves stand out of its rounding
    monkeypatch.setitem(UNIT_ROUNDOFF, "float64", u)
    ctx = CheckContext(Subject(Residual, summed_loss, batch(4), "float64"), ((1, 3),), Recipe(), epochs=1)
    runs = ctx.subject.build_identical(3)
    start = ctx.subject.build()
    rows = np.arange(4)
    g = ctx.subject.reference_gradient(start, rows=rows)
    bound = {n: b + STEP_ROUNDINGS * u * np.abs(g[n]) for n, b in ctx.bound_at(start, rows, 2).bounds.items()}
    lr = StepLR(0.1, 1, 0.5).step()
    steps, _ = _plain_runs(ctx, runs, lambda: SGD(0.1), parts_of((1, 3)), 2)  # one window, one step
    assert steps == 1
    p0 = {n: np.asarray(p.numpy()) for n, p in start.named_parameters()}
    for sign, run in zip((0, 1, -1), runs, strict=True):
        for name, p in run.named_parameters():
            moved = p0[name] - lr * (g[name] + sign * bound[name])
            np.testing.assert_allclose(p.numpy(), moved - sign * 2.0 * u * np.abs(moved), rtol=1e-12, atol=1e-15)


def test_an_empty_parameter_and_a_zero_gap_are_no_distance_from_any_tolerance() -> None:
    tolerance = Tolerance({"none": np.array(1.0), "w": np.array(1.0)}, "why")
    assert tolerance.excess("none", np.zeros(0)) == (0.0, 0.0, 0.0)
    assert tolerance.excess("w", np.zeros(3)) == (0.0, 0.0, 1.0)

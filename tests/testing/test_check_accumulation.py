"""check_accumulation on a user's own model: passes when accumulation is exact, names the
parameter, the split and the gap when it is not, and says why its tolerance is what it is."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from minitorch_accum import nn
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import (
    AccumulationMismatch,
    Case,
    ModelSpec,
    check_accumulation,
    check_properties,
    default_splits,
    rounding_bound,
    run_full_batch,
    run_window,
    splits,
)
from minitorch_accum.testing.property_results import INEXACT
from tests.testing.models import Residual, batch, padded_loss, padded_tokens, summed_loss, token_model


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_users_residual_layer_norm_model_passes_within_its_derived_bound(dtype: str) -> None:
    report = check_accumulation(Residual, summed_loss, batch(), dtype=dtype)
    result = report["window_equals_full_batch"]
    assert report.passed and result.status == "passed"
    assert (12,) in report.splits and (1,) * 12 in report.splits and len(report.splits) >= 5
    assert set(result.gaps()) == {n for n, _ in Residual().named_parameters()}
    for worst in result.worst.values():
        assert worst.gap <= worst.tolerance and worst.ratio <= 1
    # the tolerance is the dtype's rounding bound for the split's k, not a number picked by hand
    assert f"rounding bound for {dtype}" in result.why and "k = " in result.why and "gamma_" in result.why
    assert max(w.tolerance for w in result.worst.values()) < (1e-13 if dtype == "float64" else 1e-5)


def test_a_mismatch_names_the_parameter_the_split_and_the_gap() -> None:
    ids, targets = padded_tokens()
    with pytest.raises(AccumulationMismatch) as caught:
        check_accumulation(token_model, padded_loss, (ids, targets), splits=[(1, 7), (4, 4)], reduction="mean")
    error = caught.value
    names = {n for n, _ in token_model().named_parameters()}
    assert error.property == "window_equals_full_batch" and error.parameter in names
    assert "split (1, 7)" in error.scenario or "split (4, 4)" in error.scenario
    assert error.gap > 1e3 * error.tolerance > 0
    assert f"parameter {error.parameter!r} differs by {error.gap:.3e}" in str(error) and error.scenario in str(error)


def test_the_reported_gap_is_the_mean_of_means_error_computed_independently() -> None:
    """reduction='mean': (1/k) sum_j G_j / n_j against sum_j G_j / N, computed here by plain backward."""
    ids, targets = padded_tokens()
    report = check_properties(token_model, padded_loss, (ids, targets), splits=[(3, 5)], reduction="mean",
                              properties=["window_equals_full_batch"], raise_on_failure=False, dtype="float64")
    model = token_model().to(dtype="float64")  # the check's dtype
    shares, counts = [], []
    for rows in (slice(0, 3), slice(3, 8)):
        loss, n = padded_loss(model(ids[rows]), targets[rows])
        grads = loss.backward()
        shares.append({name: np.asarray(grads[p]) for name, p in model.named_parameters()})
        counts.append(n)
    for name, gap in report["window_equals_full_batch"].gaps().items():
        mean = (shares[0][name] / counts[0] + shares[1][name] / counts[1]) / 2
        exact = (shares[0][name] + shares[1][name]) / sum(counts)
        assert gap == pytest.approx(float(np.max(np.abs(mean - exact))), rel=1e-9, abs=1e-15)
    assert not report.passed and report.failures[0].name == "window_equals_full_batch"


def test_rtol_replaces_the_bound_and_says_so() -> None:
    ids, targets = padded_tokens()
    with pytest.raises(AccumulationMismatch, match=r"rtol = 0\.001 given by the caller"):
        check_accumulation(token_model, padded_loss, (ids, targets), splits=(1, 7), reduction="mean", rtol=1e-3)
    loose = check_accumulation(token_model, padded_loss, (ids, targets), splits=(1, 7), reduction="mean", rtol=2.0)
    assert loose.passed and "rtol = 2 given by the caller" in loose["window_equals_full_batch"].why


def test_batch_norm_is_inconclusive_and_dropout_is_compared_under_masks_that_follow_the_items() -> None:
    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    def with_dropout() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.Dropout(0.3), nn.Linear(6, 3))

    with pytest.raises(AccumulationMismatch, match=r"inconclusive: layer 1 \(BatchNorm1d\): BatchNorm in training"):
        check_accumulation(with_batch_norm, summed_loss, batch())
    report = check_accumulation(with_batch_norm, summed_loss, batch(), allow_inconclusive=True)
    result = report["window_equals_full_batch"]
    assert result.status == INEXACT and result.max_gap > 1e-4 and "inconclusive" in str(report)
    assert all(min(sizes) >= 2 for sizes in report.splits)  # BatchNorm needs two items per micro-batch
    dropped = check_accumulation(with_dropout, summed_loss, batch())
    assert dropped.passed and dropped["window_equals_full_batch"].status == "passed"
    assert (1,) * 12 in dropped.splits and dropped["window_equals_full_batch"].max_gap > 0


def test_the_loss_contract_the_factory_and_the_splits_are_checked() -> None:
    x, y = batch()
    with pytest.raises(TypeError, match=r"loss_fn must return \(summed loss, item count\)"):
        check_accumulation(Residual, lambda out, t: F.cross_entropy(out, t, reduction="sum"), (x, y), splits=(12,))
    with pytest.raises(TypeError, match="item count must be a non-negative int"):
        check_accumulation(Residual, lambda out, t: (F.cross_entropy(out, t), 2.5), (x, y), splits=(12,))
    assert check_accumulation(lambda: nn.Sequential(nn.Linear(5, 3)), summed_loss, (x, y), splits=(5, 7)).passed
    with pytest.raises(ValueError, match=r"splits: \(5, 5\) covers 10 rows, the batch holds 12"):
        check_accumulation(Residual, summed_loss, (x, y), splits=(5, 5))
    with pytest.raises(ValueError, match="fusion must be one of leaf, gemm, none"):
        check_accumulation(Residual, summed_loss, (x, y), fusion="fast")
    with pytest.raises(ValueError, match="batch: inputs and targets hold different numbers of rows"):
        check_accumulation(Residual, summed_loss, (x, y[:5]))


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_every_fusion_and_the_sum_reduction_check_out(fusion: str) -> None:
    ids, targets = padded_tokens()
    assert check_accumulation(token_model, padded_loss, (ids, targets), splits=[(2, 1, 5)], fusion=fusion).passed
    assert check_accumulation(Residual, summed_loss, batch(), splits=(5, 7), fusion=fusion, reduction="sum").passed


def test_default_splits_hold_the_whole_batch_one_row_each_and_drawn_uneven_ones() -> None:
    drawn = default_splits(10)
    assert drawn[:2] == ((10,), (1,) * 10) and len(drawn) >= 4
    assert all(sum(s) == 10 and min(s) >= 1 for s in drawn) and any(len(set(s)) > 1 for s in drawn)
    assert default_splits(40)[0] == (40,) and (1,) * 40 not in default_splits(40)


@settings(max_examples=3)
@given(sizes=splits(12))
def test_inside_a_hypothesis_test_the_splits_come_from_a_seeded_draw(sizes: tuple[int, ...]) -> None:
    assert default_splits(12) == default_splits(12)  # no nested hypothesis run
    assert check_accumulation(Residual, summed_loss, batch(), splits=sizes).passed


def test_rounding_bound_works_for_a_custom_module_and_holds_the_float32_gap() -> None:
    """Issue 18 saw ``TypeError: 'MyNet' object is not iterable``: the bound walks the parameters now."""
    case = Case(model=ModelSpec(widths=(5, 8, 3)), sizes=(4, 1, 7), dtype="float32")
    model = Residual().to(dtype="float32")
    bound = rounding_bound(case, model)
    assert set(bound) == {n for n, _ in model.named_parameters()}
    _, acc = run_window(case, model)
    window = {n: np.asarray(g, dtype=np.float64) for n, g in
              ((n, acc.grads()[p]) for n, p in model.named_parameters())}
    _, full = run_full_batch(case, Residual().to(dtype="float32"))
    for name, gap in ((n, np.abs(window[n] - full[n])) for n in full):
        assert np.all(gap <= bound[name]), name
        assert np.all(bound[name] <= 1e-4 * np.max(np.abs(full[name])) + 1e-12), name  # not vacuous


def test_rtol_is_rtol_times_each_parameters_largest_gradient_entry() -> None:
    ids, targets = padded_tokens()
    report = check_properties(token_model, padded_loss, (ids, targets), splits=[(1, 7)], rtol=1e-3, dtype="float64",
                              properties=["window_equals_full_batch"])
    model = token_model().to(dtype="float64")
    loss, items = padded_loss(model(ids), targets)
    grads = loss.backward()
    for name, p in model.named_parameters():
        largest = float(np.max(np.abs(np.asarray(grads[p]) / items)))
        assert largest < 1 and report["window_equals_full_batch"].worst[name].tolerance == pytest.approx(1e-3 * largest)
    assert "pass rtol=None for the rounding bound" in report["window_equals_full_batch"].why
    for bad in (0.0, -1e-3):
        with pytest.raises(ValueError, match="rtol must be positive"):
            check_accumulation(token_model, padded_loss, (ids, targets), splits=[(1, 7)], rtol=bad)


def test_training_mode_batch_norm_gets_only_splits_of_two_rows_or_more_and_the_halves() -> None:
    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    for rows, chosen in ((2, ((2,),)), (3, ((3,),)), (6, ((6,), (3, 3)))):
        report = check_accumulation(with_batch_norm, summed_loss, batch(rows), allow_inconclusive=True)
        assert report.splits == chosen, rows

"""No empty pass: a report is green only when a property really compared something and held.
Dropout is compared under masks that follow the items, rows that interact are named, item counts
are checked without ``loss_fn``, an inconclusive property fails unless allowed, and a property that
crashes fails alone."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.backend import default_generator
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import AccumulationMismatch, check_accumulation, check_properties
from minitorch_accum.testing.bug_recipes import (
    ClipsEachMicroBatch,
    MeanOfMicroBatchMeans,
    NominalKOnPartialWindows,
    ScheduledPerMicroBatch,
)
from minitorch_accum.testing.equivalence import AccumulationReport
from minitorch_accum.testing.false_alarm_corpus import FAMILIES
from minitorch_accum.testing.item_keyed_draws import UnkeyableDrawError, keyed_draws
from minitorch_accum.testing.properties import PROPERTIES
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED, SKIPPED, PropertyResult
from minitorch_accum.testing.simulated_ranks import RankFailedError
from minitorch_accum.testing.subject import Subject
from tests.testing.models import Residual, batch, padded_tokens, summed_loss, token_model

SPLITS = [(3, 1, 4, 4)]


def test_a_draw_gives_each_item_its_mask_wherever_it_falls() -> None:
    with keyed_draws(7, [3, 4, 5]):
        together = default_generator().random((3, 2, 4))
        second = default_generator().random((6, 2))  # a second draw of the forward: another mask
    with keyed_draws(7, [4]):
        alone = default_generator().random((1, 2, 4))
        flattened = default_generator().random((2, 2))  # (rows x 2, ...): two positions per row
    np.testing.assert_array_equal(together[1], alone[0])
    np.testing.assert_array_equal(second[2:4], flattened)
    assert not np.array_equal(together[0], together[1])
    with keyed_draws(8, [4]):
        assert not np.array_equal(default_generator().random((1, 2, 4)), alone)  # the seed counts
    with keyed_draws(7, [3, 4, 5]), pytest.raises(UnkeyableDrawError, match=r"shape \(4, 3\).*3 rows"):
        default_generator().random((4, 3))
    seen = []
    with keyed_draws(7, [3]):
        worker = threading.Thread(target=lambda: seen.append(default_generator()))
        worker.start()
        worker.join()
    assert not hasattr(seen[0], "_rows")  # other threads (other ranks) keep their own draws


class FunctionalDropout(nn.Module):
    def __init__(self) -> None:
        self.a, self.b = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.b(F.dropout(self.a(x), 0.3, self.training).tanh())


def layer_dropout() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.3, rng=np.random.default_rng(1)), nn.Tanh(), nn.Linear(8, 3))


@pytest.mark.parametrize("factory", [layer_dropout, FunctionalDropout], ids=["layer", "functional"])
def test_a_model_with_active_dropout_passes_when_right_and_fails_when_wrong(factory: object) -> None:
    report = check_properties(factory, summed_loss, batch(), splits=SPLITS)
    assert all(r.status == PASSED for r in report.results), str(report)
    assert report["window_equals_full_batch"].max_gap > 0
    for recipe, name in ((MeanOfMicroBatchMeans(), "window_equals_full_batch"),
                         (NominalKOnPartialWindows(), "window_equals_full_batch"),
                         (ScheduledPerMicroBatch(), "steps_equal_big_batch")):
        faulty = check_properties(factory, summed_loss, batch(), splits=SPLITS, recipe=recipe, properties=[name],
                                  raise_on_failure=False)
        assert faulty[name].status == FAILED and not faulty.passed, recipe.name


def test_attention_dropout_and_residual_dropout_follow_the_items() -> None:
    family = FAMILIES["attention_dropout"]
    report = check_properties(family.factory, family.loss_fn, family.batch(0, 10), splits=[(2, 5, 3)],
                              dtype="float64")
    assert all(r.status == PASSED for r in report.results), str(report)


class TransposedDropout(nn.Module):
    """Dropout over a (features, rows) tensor: its mask cannot follow the items."""

    def __init__(self) -> None:
        self.a, self.b = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.b(F.dropout(self.a(x).mT, 0.5, self.training).mT.tanh())


def test_a_mask_that_cannot_follow_the_items_is_checked_in_evaluation_mode_and_said() -> None:
    report = check_accumulation(TransposedDropout, summed_loss, batch(), splits=SPLITS)
    assert report.passed
    assert any("shape (8, 12)" in n and "evaluation mode (model.eval(), dropout off)" in n for n in report.notes)


class Noisy(nn.Module):
    """Noise drawn with normal(): no mask the check can key to items."""

    def __init__(self) -> None:
        self.a = nn.Linear(5, 3)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.a(x) + mta.tensor(default_generator().normal(size=(len(x), 3)), dtype=x.dtype)


def test_a_forward_random_beyond_dropout_is_inconclusive_and_fails_unless_allowed() -> None:
    with pytest.raises(AccumulationMismatch, match="inconclusive: the forward is random in a way the check cannot "
                                                   "tie to items: two forwards of the same rows give the losses"):
        check_accumulation(Noisy, summed_loss, batch(), splits=SPLITS)
    allowed = check_accumulation(Noisy, summed_loss, batch(), splits=SPLITS, allow_inconclusive=True)
    assert allowed.passed and allowed["window_equals_full_batch"].status == INEXACT


class Centered(nn.Module):
    def __init__(self) -> None:
        self.a, self.b = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        h = self.a(x)
        return self.b((h - h.mean(axis=0, keepdims=True)).tanh())


def contrastive(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output @ output.mT, np.arange(len(targets)), reduction="sum"), len(targets)


@pytest.mark.parametrize(("factory", "loss"), [(Centered, summed_loss), (Residual, contrastive)],
                         ids=["batch centering", "in-batch contrastive"])
def test_rows_that_interact_are_named(factory: object, loss: object) -> None:
    with pytest.raises(AccumulationMismatch, match="inconclusive: the rows of the batch interact: the loss is not a "
                                                   "sum over items"):
        check_properties(factory, loss, batch(), splits=SPLITS)
    report = check_properties(factory, loss, batch(), splits=SPLITS, raise_on_failure=False)
    assert all(r.status == INEXACT for r in report.results if r.name not in (
        "loss_scaling_is_invisible", "resume_mid_window_equals_uninterrupted"))


def test_batch_norm_is_named_and_inconclusive_unless_allowed() -> None:
    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    report = check_properties(with_batch_norm, summed_loss, batch(), splits=[(3, 2, 3, 4)], raise_on_failure=False)
    assert not report.passed and report.inexact and "inconclusive" in str(report)
    assert all("BatchNorm in training mode" in " ".join(r.notes) for r in report.inexact)
    assert check_properties(with_batch_norm, summed_loss, batch(), splits=[(3, 2, 3, 4)],
                            allow_inconclusive=True).passed


def padding_counted(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output, targets, reduction="sum"), targets.size


def counted_before_shift(output: mta.Tensor, labels: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output[:, :-1], labels[:, 1:], reduction="sum"), F.count_items(labels)


def counted_after_shift(output: mta.Tensor, labels: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output[:, :-1], labels[:, 1:], reduction="sum"), F.count_items(labels[:, 1:])


def per_sequence(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output, targets, reduction="sum"), len(targets)


@pytest.mark.parametrize(("loss", "cause"), [
    (padding_counted, r"loss_fn counts 40 items in the batch, but the loss depends on 18 positions of the output: "
                      r"it counts every target position, padding included \(22 targets are ignore_index -100\)"),
    (counted_before_shift, r"one fewer per row: the items are counted before the label shift"),
])
def test_a_loss_fn_that_miscounts_its_items_fails_naming_the_mistake(loss: object, cause: str) -> None:
    with pytest.raises(AccumulationMismatch, match=cause) as caught:
        check_properties(token_model, loss, padded_tokens(), splits=[(1, 4, 3)])
    assert caught.value.property == "window_equals_full_batch" and caught.value.gap > 1e3 * caught.value.tolerance


@pytest.mark.parametrize("loss", [counted_after_shift, per_sequence])
def test_a_loss_fn_that_counts_what_it_sums_passes(loss: object) -> None:
    assert check_properties(token_model, loss, padded_tokens(), splits=[(1, 4, 3)]).passed


def test_a_zero_gradient_compares_nothing_and_does_not_pass() -> None:
    def constant(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
        return (output * 0.0).sum(), len(targets)

    report = check_properties(Residual, constant, batch(), splits=SPLITS, raise_on_failure=False)
    assert not report.passed and {r.status for r in report.results} <= {INEXACT, SKIPPED}
    assert "the big batch's gradient is 0 for every parameter" in str(report)


class ClipsEachMicroBatchWithoutOptions(ClipsEachMicroBatch):
    """Clips per micro-batch, and its accumulator hook takes no options: a rank, which passes its
    reducer, raises a TypeError inside its thread."""

    def accumulator(self, subject: Subject, model: nn.Module, steps: int) -> Accumulator:  # type: ignore[override]
        return super().accumulator(subject, model, steps)


def test_a_property_that_raises_fails_alone_and_the_others_still_run() -> None:
    """Issue 26: a museum recipe crashed check_properties with RankFailedError, hiding every result
    (that recipe runs on ranks since; a recipe whose hook a rank cannot call stands in for it)."""
    report = check_properties(Residual, summed_loss, batch(), splits=SPLITS,
                              recipe=ClipsEachMicroBatchWithoutOptions(), raise_on_failure=False)
    crashed = report["data_parallel_equals_one_rank"]
    assert crashed.status == FAILED and isinstance(crashed.error, RankFailedError)
    assert isinstance(crashed.error.__cause__, TypeError)
    assert report["clipping_uses_the_window_norm"].status == FAILED and report["clipping_uses_the_window_norm"].worst
    assert report["window_equals_full_batch"].status == PASSED and len(report.results) == len(PROPERTIES)
    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, summed_loss, batch(), splits=SPLITS, recipe=ClipsEachMicroBatchWithoutOptions(),
                         properties=["data_parallel_equals_one_rank"])
    assert "the property raised RankFailedError" in str(caught.value)
    assert isinstance(caught.value.__cause__, RankFailedError)


def test_a_report_is_green_only_when_something_compared_and_held() -> None:
    passed, skipped, inexact, failed = (PropertyResult(name, "") for name in "abcd")
    passed.status, skipped.status, inexact.status, failed.status = PASSED, SKIPPED, INEXACT, FAILED
    assert AccumulationReport([passed, skipped], ((2, 2),), "float64").passed
    assert not AccumulationReport([skipped], ((2, 2),), "float64").passed
    assert not AccumulationReport([passed, inexact], ((2, 2),), "float64").passed
    assert AccumulationReport([passed, inexact], ((2, 2),), "float64", allow_inconclusive=True).passed
    assert not AccumulationReport([passed, failed], ((2, 2),), "float64", allow_inconclusive=True).passed
    with pytest.raises(AccumulationMismatch, match="no property compared anything"):
        AccumulationReport([skipped], ((2, 2),), "float64").raise_if_failed()
    assert skipped.settle().status != PASSED
    empty = PropertyResult("e", "").settle()
    assert empty.status == SKIPPED and "nothing was compared" in empty.notes[0]


def test_the_keyed_generator_passes_other_draws_through_and_keeps_the_dtype() -> None:
    with keyed_draws(7, [3, 4]):
        keyed = default_generator()
        single = keyed.random()
        into = np.zeros(3)
        keyed.random(3, out=into)
        narrow = keyed.random((2, 3), dtype=np.float32)
        scalar_rows = keyed.random(4)
        normal = keyed.normal(size=2)
    assert isinstance(single, float) and np.all(into > 0) and normal.shape == (2,)
    assert narrow.dtype == np.float32 and scalar_rows.shape == (4,)
    with keyed_draws(7, [4]):
        np.testing.assert_array_equal(default_generator().random((1, 3), dtype=np.float32), narrow[1:])


def test_the_label_shift_is_named_with_left_padding_and_a_miscount_of_plain_labels_too() -> None:
    ids, targets = padded_tokens()
    left = np.concatenate([np.full((8, 1), -100), targets[:, :-1]], axis=1)  # 3 rows start with padding
    left[:5] = targets[:5]
    with pytest.raises(AccumulationMismatch, match=r"one fewer per row: the items are counted before the label "
                                                   r"shift .*count the shifted labels, "
                                                   r"F.count_items\(targets\[:, 1:\]\)"):
        check_properties(token_model, counted_before_shift, (ids[:, :4], left[:, :4]), splits=[(1, 4, 3)],
                         properties=["window_equals_full_batch"])

    def one_more(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
        return F.cross_entropy(output, targets, reduction="sum"), len(targets) + 1

    with pytest.raises(AccumulationMismatch, match=r"loss_fn counts 13 items in the batch, but the loss depends on "
                                                   r"12 positions of the output \(36 elements, 12 rows\): it divides "
                                                   "by the wrong number"):
        check_accumulation(Residual, one_more, batch(), splits=SPLITS)


@pytest.mark.parametrize("rows", [4, 13])
def test_batch_norm_keeps_the_default_splits_of_two_items_or_more_and_a_half_split(rows: int) -> None:
    from minitorch_accum.testing import default_splits

    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    x, y = batch(rows)
    report = check_accumulation(with_batch_norm, summed_loss, (x, y), allow_inconclusive=True)
    half = (rows // 2, rows - rows // 2)
    assert report.splits == tuple(dict.fromkeys([*(s for s in default_splits(rows) if min(s) >= 2), half]))


def test_the_rows_that_interact_are_named_by_the_parameter_furthest_over_the_bound() -> None:
    from minitorch_accum.testing.check_context import CheckContext
    from minitorch_accum.testing.parameter_bound import parameter_walk_bound
    from minitorch_accum.testing.subject import Subject

    ctx = CheckContext(Subject(Centered, summed_loss, batch(), "float64"), ((3, 1, 4, 4),))
    (reason,) = ctx.inexact()
    magnitudes = ctx.magnitudes()
    summed = ctx.subject.reference_gradient(ctx.subject.build(), reduction="sum")
    bound = parameter_walk_bound(magnitudes, 12, "float64", "sum")
    ratios = {name: bound.excess(name, np.abs(total - summed[name])) for name, total in magnitudes.total.items()}
    name, (ratio, gap, _) = max(ratios.items(), key=lambda item: item[1][0])
    assert f"the whole batch's gradient of {name!r} differs from the sum of its rows' by {gap:.3e}, {ratio:.3g} " \
           "times the rounding bound" in reason
    assert ctx.inexact(random_only=True) == []


def test_a_draw_is_keyed_by_the_seed_the_row_and_its_place_and_other_draws_pass_through() -> None:
    with keyed_draws(7, [3, 5]):
        first, second, third = (default_generator().random((2, 3)) for _ in range(3))
        scalar = default_generator().random()
        into = np.zeros(4, dtype=np.float32)
        default_generator().random(dtype=np.float32, out=into)
    for place, drawn in enumerate((first, second, third)):  # as the module docstring states the key
        for index, row in enumerate((3, 5)):
            np.testing.assert_array_equal(drawn[index], np.random.default_rng((7, row, place)).random(3))
    assert isinstance(scalar, float) and 0 <= scalar < 1
    assert into.dtype == np.float32 and np.all(into > 0)
    with keyed_draws(7, [3, 4, 5]), pytest.raises(UnkeyableDrawError) as caught:
        default_generator().random((4, 3))
    assert (caught.value.shape, caught.value.rows) == ((4, 3), 3)


def test_rows_interact_when_their_sum_is_past_the_bound_and_not_within_it() -> None:
    from minitorch_accum.testing.check_context import CheckContext
    from minitorch_accum.testing.parameter_bound import parameter_walk_bound
    from minitorch_accum.testing.recipes import Recipe

    ctx = CheckContext(Subject(Residual, summed_loss, batch(4), "float64"), ((1, 3),), Recipe())
    magnitudes = ctx.magnitudes()
    summed = ctx.subject.reference_gradient(ctx.subject.build(), reduction="sum")
    bound = parameter_walk_bound(magnitudes, magnitudes.rows, "float64", "sum").bounds["head.bias"]
    for times, interact in ((0.5, False), (1.5, True)):
        moved = summed["head.bias"].copy()
        moved[0] += times * bound[0]  # one entry past (or within) its bound, the others exact
        magnitudes.total = {**{n: g.copy() for n, g in summed.items()}, "head.bias": moved}
        found = ctx._rows_interact()
        assert bool(found) == interact, times
    gap = abs(float(magnitudes.total["head.bias"][0] - summed["head.bias"][0]))
    assert found == [f"the rows of the batch interact: the loss is not a sum over items (the whole batch's gradient "
                     f"of 'head.bias' differs from the sum of its rows' by {gap:.3e}, 1.5 times the rounding bound): "
                     "batch statistics, a centering or normalization over the batch, an in-batch contrastive loss, or "
                     "random draws that depend on the batch"]


def test_a_layer_that_is_the_whole_model_is_named_by_its_type_and_inactive_dropout_is_no_reason() -> None:
    from minitorch_accum.testing.subject import inexact_layers

    assert inexact_layers(nn.BatchNorm1d(3)) == ["BatchNorm1d: BatchNorm in training mode normalizes each "
                                                 "micro-batch by its own statistics, so an item's output depends on "
                                                 "the micro-batch it is in"]
    assert inexact_layers(nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.0))) == []
    assert inexact_layers(nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.25))) == [
        "layer 1 (Dropout): dropout (p=0.25) draws its masks per micro-batch, so the window and the big batch drop "
        "different units"]


class AlwaysDropsTransposed(nn.Module):
    """Dropout forced on, over a (features, rows) tensor: random even in evaluation mode, and unkeyable."""

    def __init__(self) -> None:
        self.a, self.b = nn.Linear(5, 8), nn.Linear(8, 3)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.b(F.dropout(self.a(x).mT, 0.5, True).mT.tanh())


def test_a_forward_random_even_in_evaluation_mode_is_inconclusive_and_says_so() -> None:
    report = check_properties(AlwaysDropsTransposed, summed_loss, batch(4), splits=[(1, 3)], raise_on_failure=False,
                              properties=["window_equals_full_batch"])
    assert report.results[0].status == INEXACT
    assert report.results[0].notes == ["the forward draws random numbers even in evaluation mode (a random draw of "
                                       "shape (8, 3) in the forward: its first axis is not a multiple of the "
                                       "micro-batch's 3 rows, so its values cannot follow the items)"]


def test_a_transposed_mask_whose_features_are_a_multiple_of_the_rows_is_found_at_a_smaller_micro_batch() -> None:
    # 8 features and 4 rows: the (8, 4) draw looks keyable over the whole batch; over 3 rows it is not. Before,
    # the probe tried the whole batch only, and every property then raised UnkeyableDrawError (a failed check)
    report = check_accumulation(TransposedDropout, summed_loss, batch(4), splits=[(1, 3)])
    assert report.passed and report.notes == [
        "a random draw of shape (8, 3) in the forward: its first axis is not a multiple of the micro-batch's 3 rows, "
        "so its values cannot follow the items: the check runs the model in evaluation mode (model.eval(), dropout "
        "off)"]


def _no_gradient(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return (output * 0.0).sum(), len(targets)


def test_a_loss_whose_gradient_is_zero_everywhere_is_inconclusive_with_nothing_to_compare() -> None:
    report = check_accumulation(Residual, _no_gradient, batch(4), splits=[(1, 3)], allow_inconclusive=True)
    assert report.results[0].notes == ["the big batch's gradient is 0 for every parameter: there is nothing to "
                                       "compare (does the loss depend on the parameters?)"]
    assert "\n  tolerance of window_equals_full_batch there: none: the model is not expected to match the big batch " \
           "(see the notes)\n" in str(report)


class NeedsTwoRows(Residual):
    def forward(self, x: mta.Tensor) -> mta.Tensor:
        if len(x) < 2:
            raise ValueError(f"{len(x)} row: this layer pairs rows")
        return super().forward(x)


def test_rows_that_cannot_run_alone_are_named_as_interacting() -> None:
    report = check_accumulation(NeedsTwoRows, summed_loss, batch(4), splits=[(2, 2)], allow_inconclusive=True)
    assert report.results[0].notes == ["the rows of the batch interact: a single row cannot run on its own "
                                       "(ValueError: 1 row: this layer pairs rows), so the loss is not a sum over "
                                       "items"]


def _one_item_too_many(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    loss, items = summed_loss(output, targets)
    return loss, items + 1


def test_a_summed_reduction_never_divides_so_its_count_is_not_checked() -> None:
    report = check_accumulation(Residual, _one_item_too_many, batch(4), splits=[(1, 3)], reduction="sum")
    assert report.notes == []


def test_tensor_inputs_are_cast_to_the_checked_dtype_and_integer_ones_kept() -> None:
    x, y = batch(4)
    subject = Subject(Residual, summed_loss, ((mta.tensor(x, dtype="float32"), mta.tensor(y)), y), "float64")
    floats, ints = subject.inputs(slice(0, 2))
    assert floats.dtype == np.float64 and floats.shape == (2, 5) and ints.dtype.kind == "i"
    with pytest.raises(TypeError) as caught:
        loses_the_count = Subject(Residual, lambda output, targets: summed_loss(output, targets)[0], batch(4))
        loses_the_count.loss(loses_the_count.build(), [0])
    assert str(caught.value) == ("loss_fn must return (summed loss, item count), got Tensor; e.g. return "
                                 "F.cross_entropy(out, y, reduction='sum'), F.count_items(y)")

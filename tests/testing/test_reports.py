"""What a report and a failure say: the verdict, every property's line, the tolerance's why, the
notes, the other failures, and for each property the replay line of the split that failed it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from minitorch_accum import nn
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import AccumulationMismatch, check_accumulation, check_properties
from minitorch_accum.testing.bug_recipes import (
    ClipsEachMicroBatch,
    MeanOfMicroBatchMeans,
    NormalizedPerRank,
    ScheduledPerMicroBatch,
)
from minitorch_accum.testing.property_results import FAILED, INEXACT, PropertyResult
from tests.testing.models import Residual, batch, summed_loss
from tests.testing.test_properties import ScalesTwice

SPLITS = [(12,), (3, 1, 4, 4), (6, 6)]


def _one_item_too_many(output: object, targets: np.ndarray) -> tuple:
    """The summed loss with one item more than there are (padding counted): a wrong scale."""
    loss, _ = summed_loss(output, targets)
    return loss, len(targets) + 1


def test_a_passing_report_prints_its_verdict_every_property_and_the_tolerance() -> None:
    report = check_properties(Residual, summed_loss, batch(), splits=SPLITS)
    text = str(report)
    first, *lines = text.splitlines()
    assert first == "accumulation check (float32) over 3 split(s): (12,), (3, 1, 4, 4), (6, 6): PASSED"
    for result, line in zip(report.results, lines, strict=False):
        assert line == f"  {result.summary()}"
        assert line.startswith(f"  {result.name}: passed; max gap {result.max_gap:.3e}; closest to its tolerance: ")
    window = report["window_equals_full_batch"]
    name, worst = window.worst_parameter()
    assert f"{name}, gap {worst.gap:.3e} against {worst.tolerance:.3e} ({worst.ratio:.3g} of it) with " \
           f"{worst.scenario}" in window.summary()
    assert f"  tolerance of window_equals_full_batch there: {worst.why}" in text
    assert "replay" not in text and "note:" not in text


def test_a_failed_report_prints_the_replay_of_each_property_that_did_not_pass() -> None:
    report = check_properties(Residual, summed_loss, batch(), splits=SPLITS, recipe=MeanOfMicroBatchMeans(),
                              raise_on_failure=False)
    text = str(report)
    assert text.splitlines()[0].endswith(": FAILED")
    for result in report.results:
        replay = f"  replay {result.name}: {result.replay}"
        assert (replay in text) == (result.status != "passed")
    with pytest.raises(KeyError, match="the report has no property 'window'; it ran window_equals_full_batch, "
                                       "steps_equal_big_batch"):
        report["window"]


@pytest.mark.parametrize(("recipe", "name", "split"), [
    (MeanOfMicroBatchMeans(), "window_equals_full_batch", (3, 1, 4, 4)),
    (ScheduledPerMicroBatch(), "steps_equal_big_batch", (3, 1, 4, 4)),
    (ClipsEachMicroBatch(), "clipping_uses_the_window_norm", (3, 1, 4, 4)),
    (ScalesTwice(), "loss_scaling_is_invisible", (3, 1, 4, 4)),
    (NormalizedPerRank(), "data_parallel_equals_one_rank", (3, 1, 4, 4)),
])
def test_each_property_replays_the_split_that_failed_it(recipe: object, name: str, split: tuple) -> None:
    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, summed_loss, batch(), splits=SPLITS, recipe=recipe, properties=[name], seed=4)
    error = caught.value
    assert error.property == name and f"split {split}" in error.scenario
    assert error.replay == (f"check_properties(model_factory, loss_fn, batch, splits=[{split}], seed=4, "
                            f"dtype='float32', properties=[{name!r}], recipe={type(recipe).__name__}())")
    assert str(error).splitlines()[-1] == f"replay: {error.replay}"


def test_the_replay_names_every_option_that_is_not_the_default() -> None:
    with pytest.raises(AccumulationMismatch) as caught:
        check_accumulation(Residual, summed_loss, batch(), splits=SPLITS, reduction="mean", fusion="leaf",
                           rtol=1e-9, allow_inconclusive=True)
    assert caught.value.replay.endswith("properties=['window_equals_full_batch'], reduction='mean', fusion='leaf', "
                                        "rtol=1e-09, allow_inconclusive=True)")


def test_a_mismatch_names_the_gap_the_notes_the_tolerance_and_the_other_failures() -> None:
    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, _one_item_too_many, batch(), splits=SPLITS)
    error = caught.value
    lines = str(error).splitlines()
    assert lines[0] == (f"window_equals_full_batch: parameter {error.parameter!r} differs by {error.gap:.3e} "
                        f"(tolerance {error.tolerance:.3e}, {error.result.worst_parameter()[1].ratio:.3g}x it) "
                        f"with {error.scenario}")
    assert lines[1] == ("note: loss_fn counts 13 items in the batch, but the loss depends on 12 positions of the "
                        "output (36 elements, 12 rows): it divides by the wrong number; the big batch is normalized "
                        "here by the 12 items really there")
    assert lines[2] == f"tolerance: {error.result.worst_parameter()[1].why}" and lines[3].startswith("replay: ")
    also = error.__notes__
    assert len(also) == 1 and also[0].startswith("also: steps_equal_big_batch: failed; ")
    assert also[0].count("; data_parallel_equals_one_rank: failed") == 1


def test_an_inconclusive_or_crashed_property_says_why_and_nothing_else() -> None:
    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    with pytest.raises(AccumulationMismatch) as caught:
        check_accumulation(with_batch_norm, summed_loss, batch(), splits=[(6, 6)])
    lines = str(caught.value).splitlines()
    assert lines[0] == ("window_equals_full_batch: inconclusive: layer 1 (BatchNorm1d): BatchNorm in training mode "
                        "normalizes each micro-batch by its own statistics, so an item's output depends on the "
                        "micro-batch it is in; an inconclusive property fails the check unless "
                        "allow_inconclusive=True")
    assert len(lines) == 2 and lines[1].startswith("replay: ") and not getattr(caught.value, "__notes__", [])
    result = check_accumulation(with_batch_norm, summed_loss, batch(), splits=[(6, 6)],
                                allow_inconclusive=True)["window_equals_full_batch"]
    assert result.status == INEXACT and result.summary() == (
        f"window_equals_full_batch: inconclusive; max gap {result.max_gap:.3e}, against no tolerance "
        f"[{result.notes[0]}]")
    crashed = PropertyResult("p", "claim").crashed(ZeroDivisionError("division by zero"))
    assert crashed.status == FAILED and crashed.notes == ["raised ZeroDivisionError: division by zero"]
    assert crashed.summary() == "p: failed (raised ZeroDivisionError: division by zero)"
    assert str(AccumulationMismatch(crashed)) == "p: failed: the property raised ZeroDivisionError: division by zero"


def test_the_window_tolerance_why_gives_the_formula_with_its_numbers() -> None:
    report = check_accumulation(Residual, summed_loss, batch(), splits=[(3, 1, 4, 4)], dtype="float64")
    why = report["window_equals_full_batch"].why
    found = re.search(r"rounding bound for float64 \(u = 2\^-53\) and k = (\d+): \(2 gamma_(\d+) \+ k u\) sum_r "
                      r"\|g_r\| / N \+ u \|G\| / N elementwise.*T = 12 terms summed plus F = (\d+) .*N = 12 items; "
                      r"per-row gradients g_r measured by 12 backward passes; plus 4 max_entries sum_r e_r / N per "
                      r"parameter, e_r each row's rounding error measured by a second evaluation of every row in "
                      r"float32", why)
    assert found and int(found.group(2)) == 12 + int(found.group(3)) and found.group(1) in ("4", "5")
    assert F.count_items(batch()[1]) == 12


def test_the_replay_of_check_properties_names_rtol_the_default_seed_and_no_default_recipe() -> None:
    from minitorch_accum.testing import Recipe

    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, summed_loss, batch(), splits=SPLITS, rtol=1e-30, recipe=Recipe(),
                         properties=["window_equals_full_batch"])
    assert caught.value.replay.endswith("seed=0, dtype='float32', properties=['window_equals_full_batch'], "
                                        "rtol=1e-30)")


def test_two_failures_give_one_also_note() -> None:
    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, _one_item_too_many, batch(), splits=SPLITS,
                         properties=["window_equals_full_batch", "data_parallel_equals_one_rank"])
    assert len(caught.value.__notes__) == 1
    assert caught.value.__notes__[0].startswith("also: data_parallel_equals_one_rank: failed; ")


def test_the_one_window_properties_take_an_uneven_split_with_the_most_micro_batches() -> None:
    report = check_properties(Residual, summed_loss, batch(), splits=[(3, 3, 3, 3), (5, 7), (2, 2, 8)],
                              properties=["loss_scaling_is_invisible"])
    assert report.results[0].worst_parameter()[1].split == (2, 2, 8)
    two_sizes = check_properties(Residual, summed_loss, batch(), splits=[(3, 3, 3, 3), (5, 7)],
                                 properties=["loss_scaling_is_invisible"])
    assert two_sizes.results[0].worst_parameter()[1].split == (5, 7)


CLAIMS = {
    "window_equals_full_batch": "the window's gradient equals the big batch's, for any split and a partial window",
    "steps_equal_big_batch": "k x b equals k*b after N optimizer steps (SGD, AdamW, a schedule, a short epoch)",
    "clipping_uses_the_window_norm": "the window is clipped by its own global norm, not micro-batch by micro-batch",
    "loss_scaling_is_invisible": "a loss-scaled window equals the unscaled one bit for bit",
    "resume_mid_window_equals_uninterrupted": "a window saved and resumed mid-way equals the uninterrupted window "
                                              "bit for bit",
    "data_parallel_equals_one_rank": "2 ranks x k equal one process with 2*k micro-batches",
    "item_count_matches_the_loss": "loss_fn counts as items what its summed loss sums: the output positions it "
                                   "reaches",
}


def test_every_property_states_its_claim_and_why_the_exact_ones_ask_for_equality() -> None:
    report = check_properties(Residual, summed_loss, batch(4), splits=[(1, 3)], dtype="float64")
    assert {r.name: r.claim for r in report.results} == CLAIMS  # what `maccum bugs show` prints
    why = {r.name: r.why for r in report.results}
    assert why["loss_scaling_is_invisible"] == ("bit-identical: multiplying by a power of two and by its inverse "
                                                "rounds nothing")
    assert why["resume_mid_window_equals_uninterrupted"] == (
        "bit-identical: the sums, counters and flags are saved exactly and the remaining micro-batches run the same "
        "arithmetic")
    assert re.fullmatch(r"the rounding bound times the clipping factor [0-9.]+, plus the norm's own error \(relative "
                        r"[0-9.e+-]+\) on the clipped gradient; rounding bound for float64 .*",
                        why["clipping_uses_the_window_norm"])


def test_each_kind_of_summary_joins_its_notes_and_a_pass_without_notes_ends_at_its_scenario() -> None:
    from minitorch_accum.testing.parameter_bound import Tolerance

    inexact = PropertyResult("p", "claim").settle(["one reason", "another"])
    assert inexact.summary() == "p: inconclusive; max gap 0.000e+00, against no tolerance [one reason; another]"
    plain = PropertyResult("q", "claim")
    plain.compare({"w": np.array([1.5])}, {"w": np.array([1.0])}, Tolerance({"w": np.array(1.0)}, "why"), "split s")
    line = "q: passed; max gap 5.000e-01; closest to its tolerance: w, gap 5.000e-01 against 1.000e+00 (0.5 of it) " \
           "with split s"
    assert plain.settle().summary() == line
    plain.notes += ["n1", "n2"]
    assert plain.summary() == line + " [n1; n2]"
    empty = PropertyResult("s", "claim").settle()
    empty.notes.append("and a second")
    assert empty.summary() == "s: not applicable (nothing was compared (the model has no parameters); and a second)"


def test_an_inconclusive_steps_report_says_it_has_no_tolerance() -> None:
    def with_batch_norm() -> nn.Module:
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))

    report = check_properties(with_batch_norm, summed_loss, batch(4), splits=[(2, 2)],
                              properties=["steps_equal_big_batch"], allow_inconclusive=True)
    assert report.results[0].status == INEXACT
    assert "\n  tolerance of steps_equal_big_batch there: none (see the notes)\n" in str(report)


def test_the_worst_parameter_is_the_one_furthest_over_its_tolerance_whatever_its_name() -> None:
    from minitorch_accum.testing.parameter_bound import Tolerance
    from minitorch_accum.testing.property_results import Worst

    assert PropertyResult("p", "claim").worst_parameter() == ("", Worst(0.0, 0.0, 0.0, "no scenario"))
    result = PropertyResult("p", "claim")
    tolerance = Tolerance({"a": np.array(1.0), "b": np.array(1.0)}, "why")
    result.compare({"a": np.array([3.0]), "b": np.array([0.5])}, {"a": np.array([0.0]), "b": np.array([0.0])},
                   tolerance, "s")
    assert result.worst_parameter()[0] == "a"


def test_a_mismatch_reads_its_crash_its_reasons_and_the_notes_the_report_does_not_hold() -> None:
    from minitorch_accum.testing.parameter_bound import Tolerance

    crashed = PropertyResult("p", "claim")
    crashed.compare({"w": np.array([2.5])}, {"w": np.array([0.0])}, Tolerance({"w": np.array(1.0)}, "why"), "s")
    crashed.crashed(ValueError("late"))
    assert str(AccumulationMismatch(crashed)).splitlines()[0] == (
        "p: failed: the property raised ValueError: late (worst gap before it: parameter 'w', 2.500e+00)")
    inexact = PropertyResult("q", "claim").settle(["one reason", "another"])
    assert str(AccumulationMismatch(inexact)) == ("q: inconclusive: one reason; another; an inconclusive property "
                                                  "fails the check unless allow_inconclusive=True")
    failed = PropertyResult("r", "claim")
    failed.compare({"w": np.array([2.0])}, {"w": np.array([0.0])}, Tolerance({"w": np.array(1.0)}, "why"), "s")
    failed.notes += ["its own", "shared", "its second"]
    assert str(AccumulationMismatch(failed.settle(), ["shared"])).splitlines()[0] == (
        "r: parameter 'w' differs by 2.000e+00 (tolerance 1.000e+00, 2x it) with s [its own; its second]")


def test_an_unknown_property_is_named_with_every_property_there_is() -> None:
    from minitorch_accum.testing.properties import PROPERTIES, property_named

    with pytest.raises(KeyError) as caught:
        property_named("windows_equal")
    every = ", ".join(PROPERTIES)
    assert caught.value.args[0] == f"no equivalence property 'windows_equal'; the properties are {every}"
    assert len(PROPERTIES) == 7


def test_a_report_of_properties_that_compared_nothing_prints_and_raises_saying_so() -> None:
    report = check_properties(Residual, summed_loss, batch(4), splits=[(1, 3), (2, 2)], raise_on_failure=False,
                              recipe=ClipsEachMicroBatch(), properties=["resume_mid_window_equals_uninterrupted"])
    assert not report.passed and report.results[0].status == "not applicable"
    assert str(report).splitlines()[1] == ("  resume_mid_window_equals_uninterrupted: not applicable (the recipe "
                                           "'clip_per_micro_batch' keeps no Accumulator to save)")
    with pytest.raises(AccumulationMismatch) as caught:
        report.raise_if_failed()
    assert "note: no property compared anything" in str(caught.value).splitlines()


class CrashesInEveryWindow(ScalesTwice):
    def window(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("no window today")


def test_a_property_that_crashed_before_comparing_replays_every_split() -> None:
    report = check_properties(Residual, summed_loss, batch(4), splits=[(1, 3), (2, 2)], raise_on_failure=False,
                              recipe=CrashesInEveryWindow(), properties=["window_equals_full_batch"])
    assert report.results[0].summary() == "window_equals_full_batch: failed (raised RuntimeError: no window today)"
    assert "splits=[(1, 3), (2, 2)]" in report.results[0].replay
    assert "  replay window_equals_full_batch: check_properties(model_factory, loss_fn, batch, splits=[(1, 3), " \
           "(2, 2)]" in str(report)


def test_the_reports_gaps_are_each_parameters_largest_over_every_property() -> None:
    from minitorch_accum.testing.equivalence import AccumulationReport
    from minitorch_accum.testing.parameter_bound import Tolerance

    first, second = PropertyResult("p", "claim"), PropertyResult("q", "claim")
    loose = Tolerance({"w": np.array(10.0), "b": np.array(10.0)}, "why")
    first.compare({"w": np.array([3.0]), "b": np.array([0.25])}, {"w": np.zeros(1), "b": np.zeros(1)}, loose, "s")
    second.compare({"w": np.array([2.0]), "b": np.array([0.5])}, {"w": np.zeros(1), "b": np.zeros(1)}, loose, "s")
    report = AccumulationReport([first.settle(), second.settle()], ((1,),), "float64")
    assert report.gaps() == {"w": 3.0, "b": 0.5}


def test_a_property_raises_when_it_failed_or_was_inconclusive_unless_allowed() -> None:
    from minitorch_accum.testing.parameter_bound import Tolerance

    failed = PropertyResult("p", "claim")
    failed.compare({"w": np.array([2.0])}, {"w": np.zeros(1)}, Tolerance({"w": np.array(1.0)}, "why"), "s")
    with pytest.raises(AccumulationMismatch, match=r"^p: parameter 'w' differs by 2\.000e"):
        failed.settle().raise_if_failed(allow_inconclusive=True)
    inexact = PropertyResult("q", "claim").settle(["a reason"])
    with pytest.raises(AccumulationMismatch, match=r"^q: inconclusive: a reason;"):
        inexact.raise_if_failed()
    assert inexact.raise_if_failed(allow_inconclusive=True) is inexact
    crashed = PropertyResult("r", "claim").crashed(KeyError("k"))
    with pytest.raises(AccumulationMismatch) as caught:
        crashed.raise_if_failed()
    assert caught.value.__cause__ is crashed.error

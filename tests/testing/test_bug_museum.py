"""The bug museum: every exhibit's faulty recipe is caught by its named property, and the correct
recipe passes that property on the same model; ``maccum bugs`` lists and shows them."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.cli import main
from minitorch_accum.optim import SGD
from minitorch_accum.testing import PROPERTIES, bugs
from minitorch_accum.testing.bug_recipes import BurnDropsThePartialWindow, LightningStepsOnTheEpochsLastBatch
from minitorch_accum.testing.check_context import CheckContext, parts_of
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED, SKIPPED
from minitorch_accum.testing.recipes import Recipe, gradient_arrays

#: the bugs issues 18 and 26 list, by the exhibit that reproduces each
LISTED = {"mean_of_means", "count_before_shift", "per_rank_normalization", "nominal_k_on_partial_window",
          "short_epoch_window_divided_by_k", "adam_counts_micro_batches", "clip_per_micro_batch",
          "sum_without_dividing", "scheduler_per_micro_batch", "burn_partial_window_dropped", "reset_every_backward",
          "float32_accumulator", "batch_norm_statistics"}


def test_the_museum_holds_every_listed_bug_with_a_source_and_a_property() -> None:
    assert set(bugs.EXHIBITS) == LISTED
    for item in bugs.EXHIBITS.values():
        assert item.property in PROPERTIES and item.citations and item.title
        assert all(c.project and c.reference for c in item.citations)
        recipe = item.recipe()
        assert isinstance(recipe, Recipe) and recipe.summary
        # a bug is a faulty recipe or a faulty loss_fn; BatchNorm is the model
        assert (type(recipe) is Recipe) == (item.inexact or item.faulty_subject is not None)


@pytest.mark.parametrize("name", sorted(LISTED))
def test_each_exhibit_is_caught_by_its_property_and_the_correct_recipe_passes(name: str) -> None:
    measured = bugs.measure(bugs.exhibit(name))
    assert measured.caught
    if measured.exhibit.inexact:
        assert measured.faulty.status == measured.correct.status == INEXACT
        assert measured.correct.max_gap > 1e-3 * measured.gradient_scale
        return
    assert measured.faulty.status == FAILED and measured.correct.status == PASSED
    _, worst = measured.faulty.worst_parameter()
    assert worst.gap > 1e3 * worst.tolerance  # caught by far, not by a hair of rounding
    for correct in measured.correct.worst.values():
        assert correct.ratio <= 1.0


def test_show_prints_the_recipe_the_sizes_the_measured_gap_the_property_and_the_sources() -> None:
    item = bugs.exhibit("float32_accumulator")
    text = bugs.describe(bugs.measure(item))
    assert text.startswith("float32_accumulator: a float32 accumulator under a float64 model")
    for piece in (item.what, "shown on: Sequential of 75 parameters", "a batch of 12 rows", "split (3, 1, 4, 4)",
                  "property: window_equals_full_batch", "faulty recipe: failed; max gap", "correct recipe: passed",
                  "verdict: CAUGHT", "rounding bound for float64", *map(str, item.citations)):
        assert piece in text, piece


def test_show_states_what_the_steps_property_claims() -> None:
    text = bugs.describe(bugs.measure(bugs.exhibit("scheduler_per_micro_batch")))
    assert "  property: steps_equal_big_batch (k x b equals k*b after N optimizer steps (SGD, AdamW, a schedule, " \
        "a short epoch))\n" in text


def test_maccum_bugs_list_and_show(capsys: pytest.CaptureFixture) -> None:
    assert main(["bugs", "list"]) == 0
    listing = capsys.readouterr().out
    for item in bugs.EXHIBITS.values():
        assert item.name in listing and item.property in listing
        assert all(str(c) in listing for c in item.citations)
    assert main(["bugs", "show", "mean_of_means"]) == 0
    assert "verdict: CAUGHT" in capsys.readouterr().out
    assert main(["bugs", "show", "no_such_bug"]) == 2
    assert "no exhibit 'no_such_bug'; the museum holds mean_of_means" in capsys.readouterr().err
    assert main(["bugs", "show"]) == 2
    assert "bugs show needs an exhibit's name" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(LISTED))
def test_no_exhibit_crashes_any_property(name: str) -> None:
    item = bugs.exhibit(name)
    subject = item.faulty_subject() if item.faulty_subject else item.subject()
    for prop in PROPERTIES.values():
        assert prop(CheckContext(subject, item.splits, item.recipe())).status in (PASSED, FAILED, INEXACT, SKIPPED)


def test_a_count_taken_before_the_shift_is_wrong_alike_in_window_and_big_batch_and_the_check_counts_it() -> None:
    item = bugs.exhibit("count_before_shift")
    faulty = CheckContext(item.faulty_subject(), item.splits, Recipe())
    subject, sizes = faulty.subject, item.splits[0]
    model = subject.build()
    window = gradient_arrays(Recipe().window(subject, model, parts_of(sizes), len(sizes)), model)
    by_loss_fn = subject.reference_gradient(subject.build())  # the big batch divided by loss_fn's 26
    for name, expected in faulty.reference().items():  # the check divides by the 18 targets it counts itself
        np.testing.assert_allclose(window[name], by_loss_fn[name], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(window[name] * 26 / 18, expected, rtol=1e-12, atol=1e-15)
    assert faulty.notes == ["loss_fn counts 26 items in the batch, but the loss depends on 18 positions of the output, "
                            "one fewer per row: the items are counted before the label shift (position 0's label is "
                            "never a target); count the shifted labels, F.count_items(targets[:, 1:]); the big batch "
                            "is normalized here by the 18 items really there"]
    for name in ("window_equals_full_batch", "steps_equal_big_batch", "data_parallel_equals_one_rank"):
        assert PROPERTIES[name](faulty).status == FAILED, name
    result = PROPERTIES["item_count_matches_the_loss"](faulty)
    assert result.status == FAILED
    assert "loss_fn counted 26 items, its summed loss reaches 18 output positions" in result.summary()


def test_the_count_before_the_shift_is_the_same_fault_in_the_corpus_losses() -> None:
    item = bugs.exhibit("count_before_shift")
    correct, faulty = item.subject(), item.faulty_subject()
    rows = slice(0, correct.rows)
    _, count = item.faulty_loss_of(correct.loss_fn)(correct.output(correct.build(), rows), correct.targets(rows))
    assert count == faulty.loss(faulty.build(), rows)[1] == 26


def _one_epoch(recipe: Recipe, k: int, sizes: tuple[int, ...]) -> dict[str, np.ndarray]:
    subject = bugs.exhibit("short_epoch_window_divided_by_k").subject()
    model = subject.build()
    recipe.train(subject, model, SGD(0.1), None, parts_of(sizes), k, epochs=1)
    return {name: p.numpy() - start.numpy() for (name, p), start in zip(model.named_parameters(),
                                                                         subject.build().parameters(), strict=True)}


def test_lightnings_loop_is_right_on_full_windows_and_steps_n_over_k_on_a_short_epoch() -> None:
    right, lightning = Recipe(), LightningStepsOnTheEpochsLastBatch()
    full = _one_epoch(lightning, 2, (3, 3, 3, 3))
    for name, moved in _one_epoch(right, 2, (3, 3, 3, 3)).items():
        np.testing.assert_allclose(full[name], moved, rtol=1e-12, atol=1e-15)
    short = _one_epoch(lightning, 5, (3, 3, 3, 3))  # 4 batches, k = 5: one step on the epoch's last batch
    for name, moved in _one_epoch(right, 5, (3, 3, 3, 3)).items():
        np.testing.assert_allclose(short[name], 4 / 5 * moved, rtol=1e-12, atol=1e-15)


def test_burns_loop_never_steps_an_epoch_shorter_than_k_and_drops_the_partial_window() -> None:
    burn = BurnDropsThePartialWindow()
    assert not any(np.any(moved) for moved in _one_epoch(burn, 5, (3, 3, 3, 3)).values())
    dropped = _one_epoch(burn, 3, (3, 3, 3, 3))  # the fourth micro-batch never reaches the optimizer
    kept = _one_epoch(Recipe(), 3, (3, 3, 3))
    for name, moved in kept.items():
        np.testing.assert_allclose(dropped[name], moved, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("name", "correct", "faulty"), [
    ("mean_of_means", "accumulates_with = None", "accumulates_with = 'mean'"),
    ("count_before_shift", "F.count_items(targets)", "F.count_items(labels)"),
    ("short_epoch_window_divided_by_k", "for size in self.window_sizes(len(epoch), k):",
     "if ready % k == 0 or ready == len(epoch):"),
    ("burn_partial_window_dropped", "lr = scheduler.step() if scheduler is not None else None",
     "acc.zero()  # the epoch ends"),
])
def test_show_code_prints_the_faulty_code_under_the_correct_code(name: str, correct: str, faulty: str,
                                                                 capsys: pytest.CaptureFixture) -> None:
    assert main(["bugs", "show", name, "--code"]) == 0
    out = capsys.readouterr().out
    assert "verdict: CAUGHT" in out and f"{name}: the code (--- correct, +++ faulty)" in out
    blocks = out.split("\n--- ")[1:]  # each: the correct code, then "+++" and the faulty code it became
    assert any(correct in block.split("\n+++ ")[0] and faulty in block.split("\n+++ ")[1] for block in blocks)


def test_every_exhibit_shows_its_code() -> None:
    for item in bugs.EXHIBITS.values():
        pairs = bugs.code_pairs(item)
        assert pairs and all(faulty_source.strip() for _, (_, faulty_source) in pairs), item.name

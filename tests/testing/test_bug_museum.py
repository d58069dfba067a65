"""The bug museum: every exhibit's faulty recipe is caught by its named property, and the correct
recipe passes that property on the same model; ``maccum bugs`` lists and shows them."""

from __future__ import annotations

import pytest

from minitorch_accum.cli import main
from minitorch_accum.testing import PROPERTIES, bugs
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED
from minitorch_accum.testing.recipes import Recipe

#: the bugs issue 18 lists, by the exhibit that reproduces each
LISTED = {"mean_of_means", "count_before_shift", "per_rank_normalization", "nominal_k_on_partial_window",
          "short_epoch_steps_every_batch", "adam_counts_micro_batches", "clip_per_micro_batch",
          "sum_without_dividing", "scheduler_per_micro_batch", "reset_every_backward", "float32_accumulator",
          "batch_norm_statistics"}


def test_the_museum_holds_every_listed_bug_with_a_source_and_a_property() -> None:
    assert set(bugs.EXHIBITS) == LISTED
    for item in bugs.EXHIBITS.values():
        assert item.property in PROPERTIES and item.citations and item.title
        assert all(c.project and c.reference for c in item.citations)
        recipe = item.recipe()
        assert isinstance(recipe, Recipe) and recipe.summary
        assert (type(recipe) is Recipe) == item.inexact  # a bug is a faulty recipe; BatchNorm is the model


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

"""Deterministic by default, replayable on failure: the same splits and verdicts on every run and
in every process, the CI profile derandomized, and every failure ends with the line replaying it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from minitorch_accum.testing import CI_PROFILE, DEV_PROFILE, AccumulationMismatch, check_properties, default_splits
from minitorch_accum.testing.bug_recipes import MeanOfMicroBatchMeans
from tests.testing.models import Residual, batch, summed_loss
from tests.testing.test_verdicts import FunctionalDropout

ROOT = Path(__file__).resolve().parents[2]
PRINT_SPLITS = "from minitorch_accum.testing import default_splits; print([default_splits(n) for n in (2, 12, 40)])"


def test_default_splits_are_the_same_in_every_process() -> None:
    here = [default_splits(n) for n in (2, 12, 40)]
    other = subprocess.run([sys.executable, "-c", PRINT_SPLITS], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "1", "PATH": ""}, cwd=ROOT).stdout.strip()
    assert other == str(here)
    assert here[0] == ((2,), (1, 1)) and len(set(here[1])) == len(here[1]) >= 6
    assert all(len(s) >= 2 for s in here[2][1:]) and (1,) * 40 not in here[2]


def test_a_check_run_twice_gives_the_same_report_bit_for_bit() -> None:
    first, second = (check_properties(FunctionalDropout, summed_loss, batch()) for _ in range(2))
    assert first.splits == second.splits
    for a, b in zip(first.results, second.results, strict=True):
        assert a.status == b.status and a.gaps() == b.gaps()


def test_a_failure_prints_the_line_that_replays_it_and_the_line_does() -> None:
    with pytest.raises(AccumulationMismatch) as caught:
        check_properties(Residual, summed_loss, batch(), recipe=MeanOfMicroBatchMeans(), seed=3,
                         properties=["window_equals_full_batch", "steps_equal_big_batch"])
    error = caught.value
    line = next(line for line in str(error).splitlines() if line.startswith("replay: "))
    assert line.startswith("replay: check_properties(model_factory, loss_fn, batch, splits=[(")
    assert "seed=3, dtype='float32', properties=['window_equals_full_batch'], recipe=MeanOfMicroBatchMeans())" in line
    namespace = {"check_properties": check_properties, "model_factory": Residual, "loss_fn": summed_loss,
                 "batch": batch(), "MeanOfMicroBatchMeans": MeanOfMicroBatchMeans}
    with pytest.raises(AccumulationMismatch) as again:
        eval(line.removeprefix("replay: "), namespace)
    assert (again.value.parameter, again.value.gap, again.value.scenario) == (error.parameter, error.gap,
                                                                           error.scenario)


def test_the_ci_profile_draws_the_same_examples_on_every_run() -> None:
    assert settings.get_profile(CI_PROFILE).derandomize
    assert not settings.get_profile(DEV_PROFILE).derandomize


def test_default_splits_hold_the_batch_one_row_each_up_to_32_rows_and_six_drawn_uneven_ones() -> None:
    for rows in (2, 5, 12, 32, 33):
        chosen = default_splits(rows)
        assert chosen[0] == (rows,) and all(sum(s) == rows and min(s) >= 1 for s in chosen)
        assert ((1,) * rows in chosen) == (rows <= 32)
        drawn = chosen[2 if rows <= 32 else 1:]
        assert all(2 <= len(s) <= 6 for s in drawn) and len(set(chosen)) == len(chosen)
    assert len(default_splits(40)) == 7 and any(len(set(s)) > 1 for s in default_splits(40))
    assert default_splits(1) == ((1,),)
    for bad in (0, -3, 2.0, True):
        with pytest.raises(ValueError, match="default_splits: rows must be a positive int"):
            default_splits(bad)


def test_registering_the_profiles_again_gives_the_same_settings() -> None:
    from minitorch_accum.testing.profiles import register_profiles

    register_profiles()
    ci, dev = settings.get_profile(CI_PROFILE), settings.get_profile(DEV_PROFILE)
    assert (ci.max_examples, dev.max_examples) == (25, 500)
    assert ci.deadline is None and dev.deadline is None and ci.print_blob and ci.derandomize and not dev.derandomize
    assert {"too_slow", "data_too_large"} <= {check.name for check in ci.suppress_health_check}

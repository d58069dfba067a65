"""The strategies and hypothesis profiles a user draws their own cases with."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch_accum.testing as testing
from minitorch_accum.testing import CI_PROFILE, DEV_PROFILE, Window, batches, check_accumulation, splits, windows
from tests.testing.models import Residual, summed_loss


@given(n=st.integers(1, 30), data=st.data())
def test_splits_of_n_cover_exactly_n_rows(n: int, data: st.DataObject) -> None:
    sizes = data.draw(splits(n))
    assert sum(sizes) == n and min(sizes) >= 1 and len(sizes) <= 6
    even = data.draw(splits(n, even=True))
    assert sum(even) == n and len(set(even)) == 1


@given(windows(9))
def test_windows_hold_a_split_and_a_k_at_least_its_micro_batches(window: Window) -> None:
    assert sum(window.sizes) == 9 and len(window.sizes) <= window.steps <= len(window.sizes) + 3


@given(batches([(6, 4), (6,)], classes=3), batches([(5, 3), (5, 3)], vocab=7, classes=4, ignore_index=-100))
def test_batches_draw_inputs_and_targets_of_the_given_shapes(features: tuple, tokens: tuple) -> None:
    x, y = features
    assert x.shape == (6, 4) and x.dtype == np.float64 and np.all(np.abs(x) <= 2)
    assert y.shape == (6,) and set(np.unique(y)) <= {0, 1, 2}
    ids, targets = tokens
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 7
    assert set(np.unique(targets)) <= {-100, 0, 1, 2, 3}


@settings(max_examples=5)
@given(x_y=batches([(12, 5), (12,)]), window=windows(12))
def test_a_users_hypothesis_test_in_a_few_lines(x_y: tuple, window: Window) -> None:
    assert check_accumulation(Residual, summed_loss, x_y, splits=window.sizes).passed


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match=r"splits: n .* must be a positive int, got 0"):
        splits(0)
    with pytest.raises(ValueError, match="batches: give at least one input shape and the targets' shape"):
        batches([(3,)])


def test_the_profiles_are_registered_exported_and_the_suite_runs_under_ci() -> None:
    assert (CI_PROFILE, DEV_PROFILE) == ("minitorch_accum-ci", "minitorch_accum-dev")
    assert settings.get_profile(CI_PROFILE).max_examples == 25 and settings.get_profile(DEV_PROFILE).max_examples == 500
    assert settings.get_profile(CI_PROFILE).deadline is None
    assert {"splits", "windows", "batches", "CI_PROFILE", "DEV_PROFILE"} <= set(dir(testing))
    assert settings.default.max_examples in (25, 500)  # tests/conftest.py loaded one of them

"""DynamicLossScaler on its own: GradScaler's schedule of growth and backoff, its settings, its state."""

from __future__ import annotations

import pytest

from minitorch_accum.accum import DynamicLossScaler, ScaleEvent


@pytest.mark.parametrize("setting", [
    {"init_scale": 0.0}, {"init_scale": -1.0},
    {"growth_factor": 1.0}, {"growth_factor": 0.5},
    {"backoff_factor": 1.0}, {"backoff_factor": 0.0},
], ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
def test_each_bad_setting_alone_is_refused(setting: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"^DynamicLossScaler: need init_scale > 0, growth_factor > 1, "
                                         r"0 < backoff_factor < 1$"):
        DynamicLossScaler(**setting)


@pytest.mark.parametrize("interval", [0, -3])
def test_a_growth_interval_that_is_not_positive_is_refused(interval: int) -> None:
    with pytest.raises(ValueError, match=f"^DynamicLossScaler: growth_interval must be positive, got {interval}$"):
        DynamicLossScaler(growth_interval=interval)


def test_a_scale_below_one_is_a_valid_start() -> None:
    assert DynamicLossScaler(init_scale=0.5).scale == 0.5
    assert DynamicLossScaler(init_scale=1.0, growth_interval=1).scale == 1.0


def test_the_scale_grows_after_exactly_growth_interval_clean_windows() -> None:
    scaler = DynamicLossScaler(init_scale=8.0, growth_interval=3)
    scales = []
    for _ in range(7):
        scaler.update(False)
        scales.append(scaler.scale)
    assert scales == [8.0, 8.0, 16.0, 16.0, 16.0, 32.0, 32.0]
    assert scaler.events == []


def test_an_overflow_backs_off_and_restarts_the_count_of_clean_windows() -> None:
    scaler = DynamicLossScaler(init_scale=8.0, growth_interval=3)
    scaler.update(False)
    scaler.update(False)
    scaler.update(True, window=2)  # the two clean windows before it no longer count
    assert scaler.scale == 4.0 and scaler.clean_windows == 0
    scaler.update(False)
    scaler.update(False)
    assert scaler.scale == 4.0
    scaler.update(False)
    assert scaler.scale == 8.0


def test_each_backoff_is_an_event_naming_its_window_and_both_scales() -> None:
    scaler = DynamicLossScaler(init_scale=16.0, backoff_factor=0.25)
    scaler.update(True, window=5)
    scaler.update(True, window=9)
    assert scaler.events == [ScaleEvent(5, 16.0, 4.0), ScaleEvent(9, 4.0, 1.0)]


def test_the_scale_never_backs_off_below_min_scale() -> None:
    scaler = DynamicLossScaler(init_scale=4.0, min_scale=1.5)
    for window in range(3):
        scaler.update(True, window)
    assert scaler.scale == 1.5
    assert [e.new_scale for e in scaler.events] == [2.0, 1.5, 1.5]


def test_a_loaded_state_resumes_the_growth_schedule_where_it_was() -> None:
    original = DynamicLossScaler(init_scale=8.0, growth_interval=3)
    original.update(True)
    original.update(False)
    original.update(False)
    state = original.state_dict()
    assert state == {"scale": 4.0, "clean_windows": 2}
    resumed = DynamicLossScaler(growth_interval=3)
    resumed.load_state_dict(state)
    assert (resumed.scale, resumed.clean_windows) == (4.0, 2)
    resumed.update(False)  # the third clean window since the overflow: it grows now
    original.update(False)
    assert resumed.scale == original.scale == 8.0

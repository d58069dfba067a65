"""Checkpoints of the window: what ``state_dict()`` saves and what ``load_state_dict()`` gives back
(the counts, the skipped windows, the loss scale, the sums), and that a saved state stays as saved."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.accum import FUSIONS, Accumulator, DynamicLossScaler
from tests.accum.helpers import data, max_difference, mlp, summed_loss, window_grads


def run_window(acc: Accumulator, model, x: np.ndarray, y: np.ndarray, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        acc.backward(summed_loss(model, x[i * 3:(i + 1) * 3], y[i * 3:(i + 1) * 3], "float32"), num_items=3)


def _started(fusion: str, steps: int, micro_batches: int) -> Accumulator:
    """An accumulator of a float32 MLP that has taken ``micro_batches`` micro-batches of 3 rows."""
    x, y = data()
    model = mlp("float32")
    acc = Accumulator(model, steps=steps, fusion=fusion)
    run_window(acc, model, x, y, micro_batches)
    return acc


def test_a_resumed_window_continues_its_counts_its_skipped_windows_and_its_loss_scale() -> None:
    x, y = data()
    bad = x.copy()
    bad[0, 0] = np.nan
    model = mlp("float32")
    scaler = DynamicLossScaler(init_scale=2.0**8, growth_interval=2)
    acc = Accumulator(model, steps=2, loss_scaler=scaler)
    run_window(acc, model, bad, y, 2)  # window 0: not finite, skipped; the scale backs off
    acc.zero()
    run_window(acc, model, x, y, 2)  # window 1: clean
    acc.zero()
    run_window(acc, model, x, y, 1)  # window 2: half done when saved
    state = acc.state_dict()

    resumed_scaler = DynamicLossScaler(init_scale=2.0**8, growth_interval=2)
    resumed = Accumulator(model, steps=2, loss_scaler=resumed_scaler)
    resumed.load_state_dict(state)
    assert (resumed.window_index, resumed.micro_step, resumed.items_seen) == (2, 1, 3)
    assert resumed.skipped_windows == [0]
    assert (resumed_scaler.scale, resumed_scaler.clean_windows) == (2.0**7, 1)
    for each in (acc, resumed):
        run_window(each, model, x, y, 1, start=1)
    assert max_difference(window_grads(resumed, model), window_grads(acc, model)) == 0.0
    resumed.zero()
    acc.zero()
    assert resumed.window_index == acc.window_index == 3
    assert resumed_scaler.scale == scaler.scale == 2.0**8  # the second clean window since the backoff grew it


def test_a_state_saved_without_a_loss_scaler_leaves_the_scale_of_the_one_resuming() -> None:
    x, y = data()
    model = mlp("float32")
    plain = Accumulator(model, steps=2)
    run_window(plain, model, x, y, 1)
    scaler = DynamicLossScaler(init_scale=2.0**5)
    resumed = Accumulator(model, steps=2, loss_scaler=scaler)
    resumed.load_state_dict(plain.state_dict())
    assert scaler.scale == 2.0**5 and resumed.micro_step == 1


@pytest.mark.parametrize("fusion", FUSIONS)
def test_a_state_saved_between_windows_carries_no_gradient_arrays(fusion: str) -> None:
    acc = _started(fusion, steps=2, micro_batches=2)
    acc.grads()
    acc.zero()
    state = acc.state_dict()
    assert state["arrays"] == {}
    assert state["meta"]["window_index"] == 1 and state["meta"]["micro_step"] == 0


@pytest.mark.parametrize("fusion", FUSIONS)
def test_a_saved_state_stays_as_saved_when_the_window_is_then_scaled(fusion: str) -> None:
    acc = _started(fusion, steps=3, micro_batches=1)
    state = acc.state_dict()
    saved = {key: value.copy() for key, value in state["arrays"].items()}
    acc.grads()  # divides the sums by the window's 3 items, in place
    assert saved.keys() == state["arrays"].keys() and saved
    for key, value in saved.items():
        np.testing.assert_array_equal(state["arrays"][key], value)


@pytest.mark.parametrize("fusion", FUSIONS)
@pytest.mark.parametrize(("figure", "value", "message"), [
    ("steps", 0, "steps (k, the micro-batches per window) must be a positive int, got 0"),
    ("reduction", "median", "reduction must be"),
    ("skipped_windows", ["first"], "invalid literal for int()"),
])
def test_a_state_refused_for_one_of_its_figures_leaves_the_accumulator_as_it_was(
        fusion: str, figure: str, value: object, message: str) -> None:
    x, y = data()
    saved = _started(fusion, steps=4, micro_batches=2).state_dict()
    saved["meta"][figure] = value
    model = mlp("float32")
    acc, untouched = Accumulator(model, steps=3, fusion=fusion), Accumulator(model, steps=3, fusion=fusion)
    run_window(acc, model, x, y, 1, start=3)
    run_window(untouched, model, x, y, 1, start=3)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        acc.load_state_dict(saved)
    assert (acc.window, acc.steps, acc.reduction) == (untouched.window, 3, "items")
    # the store kept its own sums, not the refused state's: the next micro-batch adds to them alone
    run_window(acc, model, x, y, 1, start=4)
    run_window(untouched, model, x, y, 1, start=4)
    assert max_difference(window_grads(acc, model), window_grads(untouched, model)) == 0.0

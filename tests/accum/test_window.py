"""The window as one value: what it holds through its life, and the checkpoint that reads it."""

from __future__ import annotations

import dataclasses

import pytest

from minitorch_accum.accum import Accumulator, Window
from tests.accum.helpers import data, mlp, summed_loss


def test_a_window_is_closed_exactly_when_it_has_a_scale_and_the_next_one_is_empty() -> None:
    window = Window(3).with_micro_batch(5).with_micro_batch(2)
    assert (window.index, window.micro_batches, window.items, window.closed) == (3, 2, 7, False)
    closed = window.closed_with(0.25).found(nonfinite=True)
    assert closed.closed and closed.scale == 0.25 and closed.nonfinite is True
    assert window.scale is None and window.nonfinite is None  # a value: the open window is unchanged
    assert closed.next() == Window(4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        window.items = 0  # type: ignore[misc]


def test_the_accumulator_holds_its_window_through_its_life() -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=2, reduction="items", fusion="leaf")
    assert acc.window == Window(0)
    for rows in (slice(0, 3), slice(3, 7)):
        acc.backward(summed_loss(model, x[rows], y[rows], "float64"), num_items=rows.stop - rows.start)
    assert acc.window == Window(0, 2, 7)
    assert (acc.window_index, acc.micro_step, acc.items_seen, acc.is_boundary) == (0, 2, 7, True)
    acc.scale_window(0.5)  # closes it: the normalization, then the clipping factor
    assert acc.window.closed and acc.window.scale == pytest.approx(0.5 / 7)
    assert acc.found_nonfinite() is False and acc.window.nonfinite is False
    acc.zero()
    assert acc.window == Window(1)


def test_a_checkpoint_of_the_window_keeps_its_keys_and_loads_both_ways() -> None:
    saved = {"steps": 2, "reduction": "items", "fusion": "gemm", "micro_step": 0, "items": 0, "window_index": 5,
             "skipped_windows": [3], "loss_scaler": None, "store": {"written": [], "gemm_bound": {}, "flag": 0}}
    acc = Accumulator(mlp(), steps=4)
    acc.load_state_dict({"meta": saved, "arrays": {}})  # as written before the window was one value
    assert acc.window == Window(5) and acc.steps == 2 and acc.skipped_windows == [3]
    assert acc.state_dict() == {"meta": saved, "arrays": {}}


def test_gradients_taken_scaled_leave_a_window_whose_scale_is_one() -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=1, reduction="items", fusion="leaf")
    acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    grads = acc.grads()  # scaled by 1/4 in place: a step reading the window must not scale again
    assert acc.window.scale == 1.0 and acc.gradient_window().grad_scale == 1.0
    assert all(grads[p] is view for p, view in acc.store.views())

"""The window's metrics line: its sums over micro-batches, added over the ranks, as the figures
a user reads in metrics.jsonl (items, loss per item, accuracy, memory, times)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from minitorch_accum.autodiff import tensor
from minitorch_accum.distributed import LocalCommunicator
from minitorch_accum.observe import PeakMemory
from minitorch_accum.testing import run_ranks
from minitorch_accum.train.step import TrainOutput
from minitorch_accum.train.window_record import WindowTotals, step_record

RECORD_KEYS = ["kind", "epoch", "step", "micro_batches", "items", "loss", "accuracy", "lr", "grad_norm",
               "peak_array_bytes", "peak_activation_bytes", "accumulation_seconds", "step_seconds",
               "items_per_second", "skipped"]


def _probe(peak: int, arrays: int | None) -> PeakMemory:
    probe = PeakMemory("cpu")
    probe.peak_bytes, probe.array_peak_bytes = peak, arrays
    return probe


def _micro(loss: float, items: int, reduction: str = "sum", correct: int | None = None) -> TrainOutput:
    return TrainOutput(tensor(loss, dtype="float64"), items, reduction, correct)


def _window(*micro_batches: tuple[TrainOutput, float, PeakMemory]) -> WindowTotals:
    window = WindowTotals()
    for out, seconds, probe in micro_batches:
        window.add(out, seconds, probe)
    return window


def _record(window: WindowTotals, comm: Any = None, **overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"epoch": 1, "step": 7, "micro_batches": window.micro, "lr": 0.01, "grad_norm": 0.5,
                            "step_seconds": 0.25, "skipped": False, **overrides}
    return step_record(window, comm or LocalCommunicator(), **args)


def test_summed_losses_add_and_mean_losses_count_once_per_item() -> None:
    summed = _window((_micro(6.0, 3), 0.0, _probe(0, 0)), (_micro(10.0, 5), 0.0, _probe(0, 0)))
    assert (summed.loss_sum, summed.items, summed.micro) == (16.0, 8, 2)
    mean = _window((_micro(2.0, 3, "mean"), 0.0, _probe(0, 0)), (_micro(1.0, 5, "mean"), 0.0, _probe(0, 0)))
    assert (mean.loss_sum, mean.items) == (11.0, 8)


def test_correct_counts_add_and_a_task_without_accuracy_keeps_none() -> None:
    window = _window((_micro(1.0, 4, correct=3), 0.0, _probe(0, 0)), (_micro(1.0, 4, correct=2), 0.0, _probe(0, 0)))
    assert window.correct == 5
    assert _window((_micro(1.0, 4, correct=0), 0.0, _probe(0, 0))).correct == 0
    assert _window((_micro(1.0, 4), 0.0, _probe(0, 0))).correct is None


def test_seconds_add_and_memory_is_the_largest_micro_batch() -> None:
    window = _window((_micro(1.0, 1), 0.5, _probe(900, 300)), (_micro(1.0, 1), 0.25, _probe(700, 400)),
                     (_micro(1.0, 1), 0.125, _probe(800, 100)))
    assert (window.seconds, window.peak, window.array_peak) == (0.875, 900, 400)


def test_arrays_not_told_apart_in_one_micro_batch_make_the_window_none() -> None:
    assert _window((_micro(1.0, 1), 0.0, _probe(10, None))).array_peak is None
    later = _window((_micro(1.0, 1), 0.0, _probe(10, 5)), (_micro(1.0, 1), 0.0, _probe(10, None)),
                    (_micro(1.0, 1), 0.0, _probe(10, 8)))
    assert later.array_peak is None


def test_one_rank_record_holds_the_window_figures() -> None:
    window = _window((_micro(6.0, 3, correct=2), 0.5, _probe(900, 300)),
                     (_micro(10.0, 5, correct=4), 0.25, _probe(700, 400)))
    record = _record(window, micro_batches=2, lr=0.01, grad_norm=0.5, step_seconds=0.25)
    assert list(record) == RECORD_KEYS
    assert record == {"kind": "train", "epoch": 1, "step": 7, "micro_batches": 2, "items": 8, "loss": 2.0,
                      "accuracy": 0.75, "lr": 0.01, "grad_norm": 0.5, "peak_array_bytes": 400,
                      "peak_activation_bytes": 900, "accumulation_seconds": 0.75, "step_seconds": 0.25,
                      "items_per_second": 8.0, "skipped": False}


def test_one_rank_record_costs_no_collective() -> None:
    comm = LocalCommunicator()
    _record(_window((_micro(1.0, 2, correct=1), 0.5, _probe(0, 0))), comm)
    assert comm.counts.calls == {}


@pytest.mark.parametrize(("grad_norm", "recorded"), [(2.5, 2.5), (None, None), (math.inf, None), (math.nan, None)])
def test_a_non_finite_or_absent_grad_norm_is_recorded_as_null(grad_norm: float | None,
                                                              recorded: float | None) -> None:
    assert _record(_window((_micro(1.0, 2), 0.5, _probe(0, 0))), grad_norm=grad_norm)["grad_norm"] == recorded


def test_items_per_second_counts_the_accumulation_and_the_step() -> None:
    window = _window((_micro(1.0, 12), 0.5, _probe(0, 0)))
    assert _record(window, step_seconds=0.25)["items_per_second"] == 16.0
    assert _record(window, step_seconds=1.5)["items_per_second"] == 6.0
    instant = _window((_micro(1.0, 12), 0.0, _probe(0, 0)))
    assert _record(instant, step_seconds=0.0)["items_per_second"] == 0.0


def test_a_window_without_items_has_no_loss_and_no_accuracy() -> None:
    record = _record(_window((_micro(0.0, 0, correct=0), 0.5, _probe(0, 0))))
    assert record["items"] == 0 and math.isnan(record["loss"]) and record["accuracy"] is None
    assert record["items_per_second"] == 0.0


def test_a_task_without_accuracy_records_null() -> None:
    assert _record(_window((_micro(4.0, 2), 0.5, _probe(0, 0))))["accuracy"] is None


def _ranks(shares: list[list[TrainOutput]]) -> list[dict[str, Any]]:
    """Each rank's record of one window: rank r adds ``shares[r]`` (one second, 100 bytes each)."""
    def rank_main(comm: Any) -> dict[str, Any]:
        window = _window(*((out, 1.0, _probe(100 * (comm.rank + 1), 10)) for out in shares[comm.rank]))
        return _record(window, comm, micro_batches=window.micro, step_seconds=0.0)
    return run_ranks(len(shares), rank_main)


def test_two_ranks_record_the_window_summed_over_both() -> None:
    records = _ranks([[_micro(6.0, 3, correct=1), _micro(2.0, 1, correct=1)], [_micro(12.0, 4, correct=3)]])
    for record in records:
        assert (record["micro_batches"], record["items"], record["loss"], record["accuracy"]) == (3, 8, 2.5, 0.625)
    # memory and times stay each rank's own
    assert [(r["peak_activation_bytes"], r["accumulation_seconds"]) for r in records] == [(100, 2.0), (200, 1.0)]
    assert [r["items_per_second"] for r in records] == [4.0, 8.0]


def test_a_rank_without_a_micro_batch_does_not_hide_the_accuracy() -> None:
    # a short last window: rank 1 has nothing to count, the window's accuracy is rank 0's
    records = _ranks([[_micro(6.0, 4, correct=3)], []])
    assert [(r["micro_batches"], r["items"], r["accuracy"]) for r in records] == [(1, 4, 0.75)] * 2


def test_two_ranks_of_a_task_without_accuracy_record_null() -> None:
    records = _ranks([[_micro(6.0, 4)], [_micro(2.0, 4)]])
    assert [(r["loss"], r["accuracy"]) for r in records] == [(1.0, None)] * 2


def test_a_rank_without_accuracy_makes_the_window_accuracy_null() -> None:
    records = _ranks([[_micro(6.0, 4, correct=3)], [_micro(2.0, 4)]])
    assert [r["accuracy"] for r in records] == [None, None]

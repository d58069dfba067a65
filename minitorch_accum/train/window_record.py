"""What a window leaves in ``metrics.jsonl``: the sums over its micro-batches, added over the
ranks when it closes, as one record per optimizer step (``train/metrics.py`` lists its fields)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minitorch_accum.distributed import Communicator
from minitorch_accum.observe import PeakMemory
from minitorch_accum.train.step import TrainOutput

__all__ = ["WindowTotals", "step_record"]


class WindowTotals:
    """Sums over the micro-batches of the current window, for its metrics line (and its
    checkpoint: a window interrupted mid-way resumes with them).

    Memory: the largest peak of its micro-batches, measured by PeakMemory around each one's
    forward and backward: ``array_peak`` the arrays alone (the activation memory: saved
    activations and temporaries; None where arrays cannot be told apart), ``peak`` everything
    the allocator counted (arrays and Python objects, the graph's nodes among them)."""

    def __init__(self) -> None:
        self.loss_sum = 0.0
        self.items = 0
        self.correct: int | None = None
        self.micro = 0
        self.seconds = 0.0
        self.peak = 0
        self.array_peak: int | None = 0

    def add(self, out: TrainOutput, seconds: float, probe: PeakMemory) -> None:
        loss = float(out.loss.item())
        self.loss_sum += loss * out.num_items if out.reduction == "mean" else loss
        self.items += out.num_items
        if out.correct is not None:
            self.correct = (self.correct or 0) + out.correct
        self.micro += 1
        self.seconds += seconds
        self.peak = max(self.peak, probe.peak_bytes)
        arrays = probe.array_peak_bytes
        self.array_peak = None if arrays is None or self.array_peak is None else max(self.array_peak, arrays)

    def state(self) -> dict[str, Any]:
        return dict(vars(self))

    def load(self, state: dict[str, Any]) -> None:
        vars(self).update(state)


def step_record(window: WindowTotals, comm: Communicator, *, epoch: int, step: int, micro_batches: int, lr: float,
                grad_norm: float | None, step_seconds: float, skipped: bool) -> dict[str, Any]:
    """The metrics line of the optimizer step that closed ``window``: items, loss and accuracy of
    the whole window (summed over the ranks: every rank takes part), memory and times of this rank."""
    items, loss_sum, correct = window.items, window.loss_sum, window.correct
    if comm.world_size > 1:
        # a rank with no micro-batch in a short last window has nothing to count, not "no accuracy"
        counted = window.correct is not None or window.micro == 0
        totals = comm.allreduce_scalars([micro_batches, items, loss_sum, correct or 0, counted], np.float64)
        micro_batches, items, loss_sum = int(totals[0]), int(totals[1]), float(totals[2])
        correct = int(totals[3]) if totals[4] == comm.world_size else None
    seconds = window.seconds + step_seconds
    return {
        "kind": "train", "epoch": epoch, "step": step, "micro_batches": micro_batches, "items": items,
        "loss": loss_sum / items if items else float("nan"),
        "accuracy": None if correct is None or not items else correct / items,
        "lr": lr, "grad_norm": None if grad_norm is None or not math.isfinite(grad_norm) else grad_norm,
        "peak_array_bytes": window.array_peak, "peak_activation_bytes": window.peak,
        "accumulation_seconds": window.seconds,
        "step_seconds": step_seconds, "items_per_second": items / seconds if seconds > 0 else 0.0,
        "skipped": skipped,
    }

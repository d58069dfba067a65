"""The windows the end-to-end benchmark times: what one call of each variant runs.

- plain: k forwards and ``loss.backward()`` returning a Gradients container that is
  thrown away (no accumulation at all), the baseline of the differential overhead;
- accumulate: k micro-batches through the Accumulator, the window close
  (``found_nonfinite()``, whose finite check of GEMM-written views is accumulation work
  too), the optimizer step and ``acc.zero()``; the accumulate and update phases are
  recorded apart;
- traced: the accumulate part alone, for the kernel trace.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.end_to_end.cases import ModelCase
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator

__all__ = ["MicroBatches", "Phases", "accumulate_window", "plain_window", "traced_window"]

MicroBatches = list[tuple[Any, Any]]  # (inputs, targets) tensors on the run's device


@dataclass
class Phases:
    """Seconds of the accumulate and update parts of each call of one timed variant."""

    accumulate: list[float] = field(default_factory=list)
    update: list[float] = field(default_factory=list)

    def drop_first(self, count: int) -> None:
        """Forget the warm-up calls (the harness runs them untimed, but they record phases too)."""
        del self.accumulate[:count], self.update[:count]


def plain_window(case: ModelCase, model: nn.Module, micro: MicroBatches) -> Callable[[], None]:
    def window() -> None:
        for x, y in micro:
            case.loss(model, x, y).backward()
    return window


def _accumulate(case: ModelCase, acc: Accumulator, micro: MicroBatches, items: int) -> None:
    acc.set_steps(len(micro))
    for x, y in micro:
        acc.backward(case.loss(acc.model, x, y), num_items=items)
    acc.found_nonfinite()


def accumulate_window(case: ModelCase, acc: Accumulator, optimizer: Any, micro: MicroBatches, items: int,
                      phases: Phases, sync: Callable[[], None]) -> Callable[[], None]:
    def window() -> None:
        start = time.perf_counter()
        _accumulate(case, acc, micro, items)
        sync()
        closed = time.perf_counter()
        optimizer.step(acc.model, acc)
        acc.zero()
        sync()
        phases.accumulate.append(closed - start)
        phases.update.append(time.perf_counter() - closed)
    return window


def traced_window(case: ModelCase, acc: Accumulator, micro: MicroBatches, items: int) -> None:
    """The accumulate part of a window, then ``acc.zero()``: no step (the trace counts kernels only)."""
    _accumulate(case, acc, micro, items)
    acc.zero()

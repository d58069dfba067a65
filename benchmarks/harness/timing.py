"""Interleaved timing: every variant of a case sampled in turn, in a rotating order.

Machines here are noisy, so variants are timed *interleaved* (one sample of each,
in a rotating order, repeated) and compared by medians measured in the same run;
absolute times are reported, never asserted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Timer", "median", "time_interleaved"]

# seconds one call took; replaces wall-clock timing (CUDA events on a GPU, contention sampling)
Timer = Callable[[Callable[[], Any]], float]


def time_interleaved(variants: dict[str, Callable[[], Any]], repeats: int = 7, warmup: int = 2,
                     sync: Callable[[], None] | None = None, timer: Timer | None = None) -> dict[str, list[float]]:
    """Seconds per call of each variant: ``warmup`` untimed rounds, then ``repeats`` rounds
    that run every variant once, in an order rotated each round so none always goes first.
    ``timer`` replaces wall-clock timing (CUDA events on a GPU)."""
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}

    def wall(fn: Callable[[], Any]) -> float:
        if sync is not None:
            sync()
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        return time.perf_counter() - start

    measure = timer or wall
    for _ in range(warmup):
        for name in names:
            variants[name]()
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(measure(variants[name]))
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)

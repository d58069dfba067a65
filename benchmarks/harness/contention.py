"""How much CPU *other* processes used while a benchmark ran, and which rounds were quiet.

The machine may be shared: when another process holds one of two cores, a
two-thread BLAS or OpenMP region waits a scheduler tick at every barrier and a
step takes several times longer. Each timed call records the others' CPU time;
when enough rounds were quiet, medians come from those rounds only (every figure
over all rounds stays in the result file).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "MIN_QUIET_ROUNDS",
    "QUIET_SHARE",
    "ContentionTimer",
    "cpu_ticks",
    "other_cpu_share",
    "rounds_for_medians",
]

# timing rounds in which other processes used at most this share of all cores count as quiet;
# with at least MIN_QUIET_ROUNDS of them, the medians are taken over quiet rounds only
QUIET_SHARE = 0.10
MIN_QUIET_ROUNDS = 3
SHARE_WINDOW_SECONDS = 0.5

CpuReading = tuple[int, float]  # busy clock ticks of the machine, this process's CPU seconds


def cpu_ticks() -> CpuReading | None:
    """Busy clock ticks of the whole machine and this process's CPU seconds, or None off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    idle = int(fields[3]) + int(fields[4])  # idle + iowait
    times = os.times()
    return sum(int(f) for f in fields[:8]) - idle, times.user + times.system


def _others_cpu_seconds(before: CpuReading | None, after: CpuReading | None) -> float | None:
    """CPU seconds the rest of the machine used between two ``cpu_ticks()`` readings (clock
    ticks are 10 ms, so a short interval reads 0 or a tick too much)."""
    if before is None or after is None:
        return None
    busy = (after[0] - before[0]) / os.sysconf("SC_CLK_TCK")
    # not clipped at 0: the tick error of short intervals must be able to cancel out in sums
    return busy - (after[1] - before[1])


def other_cpu_share(before: CpuReading | None, started: float) -> float | None:
    """Share of the machine's cores that *other* processes kept busy since ``started``
    (a ``time.perf_counter()`` reading taken with ``before``)."""
    others = _others_cpu_seconds(before, cpu_ticks())
    if others is None:
        return None
    return max(0.0, others) / ((time.perf_counter() - started) * (os.cpu_count() or 1))


class ContentionTimer:
    """Wall-clock timer for ``time_interleaved`` that also notes how much CPU other
    processes used during each call, so quiet rounds can be told from busy ones."""

    def __init__(self, variants: int, sync: Callable[[], None]) -> None:
        self.count = variants  # calls per round
        self.sync = sync
        self.calls: list[tuple[float, float | None]] = []  # (wall seconds, others' CPU seconds)

    def __call__(self, fn: Callable[[], Any]) -> float:
        before = cpu_ticks()
        self.sync()
        start = time.perf_counter()
        fn()
        self.sync()
        wall = time.perf_counter() - start
        self.calls.append((wall, _others_cpu_seconds(before, cpu_ticks())))
        return wall

    def round_shares(self) -> list[float | None]:
        """Others' share of all cores during each timed round (None where unknown); the
        harness runs its warm-up rounds without the timer.

        /proc/stat counts busy time in 10 ms ticks while a process's own CPU time is exact,
        so an interval of a few ticks reads tens of percent either way: consecutive rounds
        are pooled until they last ``SHARE_WINDOW_SECONDS``, and each gets its pool's share."""
        cores = os.cpu_count() or 1
        rounds = [self.calls[i:i + self.count] for i in range(0, len(self.calls), self.count)]
        shares: list[float | None] = []
        pool: list[list[tuple[float, float | None]]] = []
        for index, calls in enumerate(rounds):
            pool.append(calls)
            wall = sum(w for r in pool for w, _ in r)
            if wall < SHARE_WINDOW_SECONDS and index < len(rounds) - 1:
                continue
            others = [o for r in pool for _, o in r]
            share = None if None in others or wall <= 0 else max(0.0, sum(o or 0.0 for o in others)) / (wall * cores)
            shares += [share] * len(pool)
            pool = []
        return shares


def rounds_for_medians(shares: list[float | None]) -> tuple[list[int], str]:
    """The rounds medians are taken over, and which basis that is: the quiet rounds when
    there are at least ``MIN_QUIET_ROUNDS`` of them, every round otherwise."""
    quiet = [i for i, share in enumerate(shares) if share is not None and share <= QUIET_SHARE]
    if len(quiet) >= MIN_QUIET_ROUNDS:
        return quiet, "quiet rounds"
    return list(range(len(shares))), "all rounds"

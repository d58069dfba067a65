"""The all-reduce benchmark on tiny settings: it launches 1 and 2 ranks, and its figures are
the ones its table and README rows are made of (finite, positive, consistent)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.all_reduce.main import ALL_REDUCE
from benchmarks.all_reduce.settings import quick_settings
from benchmarks.harness import run_benchmark
from tests.distributed.launcher import mpiexec

pytestmark = pytest.mark.mpi


def test_tiny_all_reduce_run_writes_finite_figures(tmp_path: Path) -> None:
    mpiexec()  # skips without the dist extra
    settings = replace(quick_settings(), arena_elements=(1 << 10,), repeats=1, windows=1)
    payload, files = run_benchmark(ALL_REDUCE, settings, tmp_path, plot=False)
    assert files.json.exists() and files.latest.name == "all_reduce-latest-cpu.json"
    (arena,) = payload["arenas"]
    assert arena["bytes"] == 4 << 10
    for key in ("copy_gbps", "allreduce_gbps", "allreduce_over_copy_time"):
        assert math.isfinite(arena[key]) and arena[key] > 0, key
    step = payload["step"]
    assert (step["k_single"], step["k_per_rank"]) == (2 * settings.k, settings.k)
    assert step["items_per_step"] == 2 * settings.k * settings.micro_batch
    assert step["speedup"] == pytest.approx(step["single_seconds"] / step["ranks_seconds"])
    assert step["overlap_over_plain"] == pytest.approx(step["overlap_seconds"] / step["ranks_seconds"])
    assert "speed-up" in ALL_REDUCE.format_table(payload)

"""The head-to-head benchmark: each side runs in its own process and reports each window and
each micro-batch by position; the ratio of a round is its two medians'. No time is asserted."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from benchmarks.end_to_end.versus import VERSUS, VersusSettings, format_versus, summarize_rounds
from benchmarks.harness import run_benchmark

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _run(windows: list[float], k: int) -> dict:
    return {"items_per_micro_batch": 10, "by_k": {str(k): {"windows": windows, "cpu_windows": windows,
                                                            "positions": [[w / k for w in windows]] * k}}}


def test_a_rounds_ratio_is_its_two_medians_and_the_spread_covers_every_round() -> None:
    runs = [(_run([1.0, 2.0, 3.0], 2), _run([2.0, 4.0, 6.0], 2)),  # ours twice as fast: 2.0
            (_run([1.0, 1.0, 1.0], 2), _run([1.0, 1.0, 1.0], 2))]  # as fast: 1.0
    row = summarize_rounds(runs, (2,))["2"]
    assert row["round_ratios"] == [2.0, 1.0]
    assert row["ratio"] == {"median": 1.5, "min": 1.0, "max": 2.0} == row["cpu_ratio"]
    assert row["ours_items_per_second"] == pytest.approx(20 / 1.0)  # median of 1, 2, 3, 1, 1, 1
    assert len(row["ms_per_micro_batch_by_position"]["ours"]) == 2


@pytest.mark.skipif(not HAS_TORCH, reason="the other side is PyTorch")
def test_each_side_in_its_own_process_writes_the_ratio_per_k(tmp_path: Path) -> None:
    settings = VersusSettings("test", (("digits_mlp", (1, 2)),), threads=(1,), rounds=1, windows=1, warmup=0)
    payload, files = run_benchmark(VERSUS, settings, tmp_path)
    assert files.json.is_file()
    data = payload["models"]["digits_mlp"]["1"]
    for k in ("1", "2"):
        row = data["by_k"][k]
        assert math.isfinite(row["ratio"]["median"]) and row["ratio"]["median"] > 0
        assert math.isfinite(row["cpu_ratio"]["median"]) and row["cpu_ratio"]["median"] > 0
        assert len(row["ms_per_micro_batch_by_position"]["torch"]) == int(k)
    assert "MTA_THREADS=1" in data["thread_settings"]["ours"] and data["thread_settings"]["torch_threads"] == 1
    assert "ours/torch" in format_versus(payload)

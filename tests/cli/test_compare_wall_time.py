"""compare's summary states the wall-time ratio of k x b to one batch of k*b against the 1.15x
of a small overhead (the figures are the runs' own; no time is asserted)."""

from __future__ import annotations

from typing import Any

from minitorch_accum.cli.compare_command import WALL_TIME_TARGET, summary, wall_time_ratio


def _run(name: str, seconds: float) -> dict[str, Any]:
    return {"name": name, "seconds": seconds, "cpu_seconds": seconds / 2, "array_bytes": None, "other_bytes": 0,
            "k_used": 8, "steps": 1,
            "curve": [(256, 1.0)], "final_loss": 1.0, "largest_window_items": 256}


def test_the_summary_gives_the_wall_time_ratio_and_says_whether_it_is_small() -> None:
    quick = [_run("8 x 32", 11.0), _run("256", 10.0), _run("32", 3.0)]
    assert wall_time_ratio(quick) == 11.0 / 10.0
    line = summary(quick, 8)[0]
    assert line.startswith("wall time: 8 x 32 took 11.0 s, 256 10.0 s: 1.10x (within the 1.15x")
    assert line.endswith("CPU time 5.5 s against 5.0 s, 1.10x)")
    slow = [_run("8 x 32", 12.0), _run("256", 10.0), _run("32", 3.0)]
    assert WALL_TIME_TARGET < 12.0 / 10.0 and "NOT within" in summary(slow, 8)[0]
    assert wall_time_ratio([_run("8 x 32", 1.0), _run("256", 0.0), _run("32", 1.0)]) is None

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


def test_a_slow_accumulated_run_is_explained_by_its_cost_per_extra_micro_batch() -> None:
    slow = [{**_run("8 x 32", 12.0), "micro_batches": 240}, {**_run("256", 10.0), "micro_batches": 40},
            _run("32", 3.0)]
    why = summary(slow, 8)[1]
    # (12 - 10) s over 200 extra micro-batches
    assert why.startswith("why: 8 x 32 runs 240 micro-batches where 256 runs 40; the extra time over the extra "
                          "micro-batches is 10.00 ms each")
    quick = [{**_run("8 x 32", 11.0), "micro_batches": 240}, {**_run("256", 10.0), "micro_batches": 40},
             _run("32", 3.0)]
    assert not any(line.startswith("why: 8 x 32 runs") for line in summary(quick, 8))


def test_short_runs_show_their_time_to_the_hundredth_of_a_second() -> None:
    short = [_run("8 x 32", 0.144), _run("256", 0.0431), _run("32", 0.2)]
    assert summary(short, 8)[0].startswith("wall time: 8 x 32 took 0.14 s, 256 0.04 s: 3.34x")


def test_the_clock_leaves_out_loading_the_data_and_building_the_model(tmp_path, monkeypatch, capsys) -> None:
    import argparse
    import time

    from minitorch_accum.cli import compare_command as compare
    from minitorch_accum.train.settings import add_options, read_options

    real_build = compare.build_run

    def slow_build(values):
        time.sleep(0.5)  # a data set that takes long to load
        return real_build(values)

    monkeypatch.setattr(compare, "build_run", slow_build)
    parser = argparse.ArgumentParser()
    add_options(parser, "compare")
    values = read_options(parser.parse_args(["--dataset", "digits", "--epochs", "1", "--micro-batch", "64",
                                             "--accum", "2", "--progress", "none", "--out", str(tmp_path)]),
                          "compare")
    results = compare.compare_runs(values, tmp_path)
    assert all(r["seconds"] < 0.5 for r in results), [r["seconds"] for r in results]
    # the 1437 training items of digits, one epoch: 23 micro-batches of 64 in 12 windows of 2; 12 of 128; 23 of 64
    assert [(r["micro_batches"], r["steps"]) for r in results] == [(23, 12), (12, 12), (23, 23)]

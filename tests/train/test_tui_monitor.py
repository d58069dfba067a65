"""The terminal monitor of maccum train --tui, driven headless by Textual's pilot."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")
pytest.importorskip("textual_plotext")

from minitorch_accum.cli import main
from minitorch_accum.cli.training_run import build_run
from minitorch_accum.train import TrainingInterrupted
from minitorch_accum.train.settings import SETTINGS
from minitorch_accum.train.tui.monitor_app import TrainingMonitor
from minitorch_accum.train.tui.monitor_progress import MonitorProgress
from minitorch_accum.train.tui.monitor_widgets import SeriesPlot, WindowGauge

K = 4


def _values(out: Path, epochs: int) -> dict[str, Any]:
    values = {row.name: row.default for row in SETTINGS}
    values.update(dataset="digits", micro_batch=64, grads_accumulation=K, num_epochs=epochs, seed=0, out=str(out),
                  checkpoint_every_steps=0, lr=3e-3, optimizer="adamw", dtype="float32")
    return values


def _monitor(out: Path, epochs: int) -> tuple[TrainingMonitor, Any]:
    progress = MonitorProgress()
    learner, train, valid = build_run({**_values(out, epochs), "progress": progress})
    progress.watch(learner)
    return TrainingMonitor(progress, lambda: learner.fit(train, valid)), learner


async def _until(pilot: Any, condition: Callable[[], bool], seconds: float = 120.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the monitor did not get there in time")


def test_the_plot_gets_one_point_per_step_and_the_window_counter_restarts_at_each(tmp_path: Path) -> None:
    app, learner = _monitor(tmp_path, epochs=2)
    readings: list[tuple[str, int]] = []
    gauge_fill, gauge_closed = WindowGauge.fill, WindowGauge.closed

    def fill(self: WindowGauge, step: int, micro: int, k: int, items: int, array_bytes: int | None) -> None:
        readings.append(("micro", micro))
        gauge_fill(self, step, micro, k, items, array_bytes)

    def closed(self: WindowGauge, step: int, k: int) -> None:
        readings.append(("step", step))
        gauge_closed(self, step, k)

    async def run() -> None:
        async with app.run_test() as pilot:
            await _until(pilot, lambda: app.finished)
            await pilot.pause()
            loss = app.query_one("#loss", SeriesPlot)
            steps = learner.history.steps
            assert loss.points("train") == len(steps) == 12  # 23 micro-batches of 64 a epoch: 6 windows of 4
            assert loss.series["train"][1] == [r["loss"] for r in steps]
            assert loss.points("valid") == 2 and app.query_one("#accuracy", SeriesPlot).points("valid") == 2
            assert app.query_one(WindowGauge).micro == 0
            await pilot.press("q")  # the run is over: q closes the monitor
        assert app.error is None and app.result is not None

    WindowGauge.fill, WindowGauge.closed = fill, closed  # type: ignore[method-assign]
    try:
        asyncio.run(run())
    finally:
        WindowGauge.fill, WindowGauge.closed = gauge_fill, gauge_closed  # type: ignore[method-assign]
    # between two steps the counter runs 1, 2, ... up to the window's micro-batches, then starts again
    windows: list[list[int]] = [[]]
    for kind, value in readings:
        if kind == "micro":
            windows[-1].append(value)
        else:
            windows.append([])
    counted = [w for w in windows if w]
    assert len(counted) == 12
    assert all(w == list(range(1, len(w) + 1)) for w in counted)
    assert [len(w) for w in counted] == [4, 4, 4, 4, 4, 3] * 2  # the epoch's last window is short


def test_q_stops_at_the_end_of_the_window_with_a_checkpoint(tmp_path: Path) -> None:
    app, learner = _monitor(tmp_path, epochs=40)

    async def run() -> None:
        async with app.run_test() as pilot:
            await _until(pilot, lambda: app.query_one("#loss", SeriesPlot).points("train") >= 2)
            await pilot.press("q")
            await _until(pilot, lambda: app.done.is_set())

    asyncio.run(run())
    assert isinstance(app.error, TrainingInterrupted) and app.progress.stopped_at_window_end
    saved = Path(app.error.checkpoint)
    assert saved.is_dir() and saved.parent == tmp_path / "checkpoints"
    state = json.loads((saved / "state.json").read_text())["state"]
    assert state["accumulator"]["micro_step"] == 0 and state["window"]["micro"] == 0  # a window boundary
    assert state["step"] == learner.step and state["next_batch"] in (4, 8, 12, 16, 20, 23)  # 23 micro-batches
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in steps if r["kind"] == "train") == learner.step < 40 * 6


def test_without_a_terminal_tui_says_so_and_trains_with_plain_progress(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--tui", "--dataset", "digits", "--micro-batch", "256", "--accum", "2", "--epochs", "1",
                 "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "--tui needs a terminal" in captured.err and "showing the plain progress instead" in captured.err
    assert "trained 3 optimizer steps" in captured.out and "step 1 " in captured.out

"""The terminal monitor of maccum train --tui, driven headless by Textual's pilot at 100 x 30: what
its panels show is read off the screen as the user sees it, after real runs and after events fed
by hand (the ETA, the recent plot, the summary, a long checkpoint path)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")
pytest.importorskip("textual_plotext")

from textual.widget import Widget
from textual.widgets import Log

from minitorch_accum.cli import main
from minitorch_accum.cli.training_run import build_run
from minitorch_accum.train import TrainingAborted, TrainingInterrupted
from minitorch_accum.train.settings import SETTINGS
from minitorch_accum.train.tui.monitor_app import TrainingEnded, TrainingMonitor
from minitorch_accum.train.tui.monitor_popup import StopPopup
from minitorch_accum.train.tui.monitor_progress import (
    CheckpointSaved,
    MonitorProgress,
    RunStarted,
    StepDone,
    ValidDone,
    auto_pace,
)
from minitorch_accum.train.tui.monitor_series import RECENT_STEPS
from minitorch_accum.train.tui.monitor_widgets import MetricPlot, RunProgress, WindowPanel

K = 4
SIZE = (100, 30)
PANELS = ("#metrics", "#status", "#window", "#progress", "#checkpoints", "#log")


def _values(out: Path, epochs: int, **more: Any) -> dict[str, Any]:
    values = {row.name: row.default for row in SETTINGS}
    values.update(dataset="digits", micro_batch=64, grads_accumulation=K, num_epochs=epochs, seed=0, out=str(out),
                  checkpoint_every_steps=0, lr=3e-3, optimizer="adamw", dtype="float32")
    return {**values, **more}


def _monitor(out: Path, epochs: int, pace: float = 0.0, **more: Any) -> tuple[TrainingMonitor, Any]:
    progress = MonitorProgress(pace=pace, unit="images")
    learner, train, valid = build_run({**_values(out, epochs, **more), "progress": progress})
    progress.watch(learner)
    return TrainingMonitor(progress, lambda: learner.fit(train, valid)), learner


async def _until(pilot: Any, condition: Callable[[], bool], seconds: float = 120.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the monitor did not get there in time")


def _screen(app: TrainingMonitor) -> list[str]:
    """The screen's rows as the terminal shows them (the compositor's output: what is drawn, clipped)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _inside(app: TrainingMonitor, widget: Widget) -> list[str]:
    """The rows of ``widget``'s box on the screen, border included."""
    region = widget.region
    return [row[region.x:region.right] for row in _screen(app)[region.y:region.bottom]]


def _content(app: TrainingMonitor, selector: str) -> list[str]:
    """The text inside a bordered panel, one entry a row, stripped."""
    return [row[1:-1].strip() for row in _inside(app, app.query_one(selector))[1:-1]]


def _check_whole(app: TrainingMonitor) -> None:
    """Every panel lies on the screen above the footer with its four corners drawn."""
    for selector in PANELS:
        rows = _inside(app, app.query_one(selector))
        region = app.query_one(selector).region
        assert region.bottom <= SIZE[1] - 1, selector
        assert rows[0][0] == "╭" and rows[0][-1] == "╮", (selector, rows[0])
        assert rows[-1][0] == "╰" and rows[-1][-1] == "╯", (selector, rows[-1])


def test_a_finished_run_shows_every_panel_whole_and_says_the_run_is_finished(tmp_path: Path) -> None:
    app, learner = _monitor(tmp_path, epochs=2, checkpoint_every_steps=2)
    readings: list[tuple[str, int]] = []
    fill, closed = WindowPanel.fill, WindowPanel.closed

    def counted_fill(self: WindowPanel, step: int, micro: int, k: int, items: int, array_bytes: int | None) -> None:
        readings.append(("micro", micro))
        fill(self, step, micro, k, items, array_bytes)

    def counted_closed(self: WindowPanel, step: int) -> None:
        readings.append(("step", step))
        closed(self, step)

    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: app.finished)
            await pilot.pause(0.4)
            steps = learner.history.steps
            assert len(steps) == 12  # 23 micro-batches of 64 an epoch: 6 windows of 4, the last of 3
            assert app.history.points["loss"]["train"][1] == [r["loss"] for r in steps]
            assert len(app.history.points["accuracy"]["valid"][0]) == 2
            _check_whole(app)
            screen = "\n".join(_screen(app))
            assert "optimizer step 13" not in screen  # the run is over: no window of a step to come
            window = _content(app, "#window")
            assert window[:2] == ["run finished after optimizer step 12", "last window: 158 images, 3 micro-batches"]
            last = steps[-1]
            status = _content(app, "#status")
            assert status[:5] == ["mode       finished", "epoch      2 of 2", "step       12 of 12",
                                  "micro-step 3 of 4", f"eff. batch {last['items']} images / 3 micro-batches"]
            assert status[5] == f"images/s   {last['items_per_second']:,.0f}"
            assert status[7] == f"grad norm  {last['grad_norm']:.4g}"
            assert "12 of 12 steps 100% done" in _content(app, "#progress")[0]
            # the checkpoints on disk (the run keeps 2), one a row, the newest last: step 12's, saved after
            # the last validation
            saved = sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir())
            rows = [row for row in _content(app, "#checkpoints") if row]
            assert [row.split(":")[0] for row in rows] == ["step 10", "step 12"]
            assert all(row.endswith(name) for row, name in zip(rows, saved, strict=True))
            assert "checkpoints: 6 written, 2 on disk" in _inside(app, app.query_one("#checkpoints"))[0]
            # tabs: right is the next metric, down the next kind: recent, then the summary
            await pilot.press("right")
            assert app.query_one("#tabs").active == "tab-accuracy" and app.query_one(MetricPlot).metric == "accuracy"
            await pilot.press("down", "down")
            summary = _content(app, "#metrics")
            assert "accuracy: summary of the run" in summary
            last_row = next(row for row in summary if row.startswith("last"))
            valid = learner.history.valid[-1]
            assert last_row.split()[1:] == [f"{last['accuracy']:.4g}", f"{valid['accuracy']:.4g}"]
            await pilot.press("q")  # the run is over: q closes the monitor
        assert app.error is None and app.result is not None

    WindowPanel.fill, WindowPanel.closed = counted_fill, counted_closed  # type: ignore[method-assign]
    try:
        asyncio.run(run())
    finally:
        WindowPanel.fill, WindowPanel.closed = fill, closed  # type: ignore[method-assign]
    # between two steps the counter runs 1, 2, ... up to the window's micro-batches, then starts again
    windows: list[list[int]] = [[]]
    for kind, value in readings:
        if kind == "micro":
            windows[-1].append(value)
        else:
            windows.append([])
    counted = [w for w in windows if w]
    assert [len(w) for w in counted] == [4, 4, 4, 4, 4, 3] * 2  # the epoch's last window is short
    assert all(w == list(range(1, len(w) + 1)) for w in counted)


def test_q_asks_c_goes_on_and_s_stops_at_the_window_end_with_a_checkpoint(tmp_path: Path) -> None:
    app, learner = _monitor(tmp_path, epochs=40, pace=0.1)
    asked_at: list[int] = []

    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: learner.step >= 2)
            await pilot.press("q")
            assert isinstance(app.screen, StopPopup)
            popup = "\n".join(_screen(app))
            assert "[s] stop at the end of this window, with a checkpoint" in popup
            assert "[k] kill now: stop after the micro-batch in progress, without a" in popup
            assert "the start: none is saved yet" in popup and "[c] cancel: go on training" in popup
            await pilot.press("c")
            assert not isinstance(app.screen, StopPopup)
            going = learner.step
            await _until(pilot, lambda: learner.step > going)  # cancelled: the run goes on
            await pilot.press("q")
            asked_at.append(learner.step)
            await pilot.press("s")
            await _until(pilot, lambda: app.done.is_set())

    asyncio.run(run())
    assert isinstance(app.error, TrainingInterrupted) and app.progress.stopped_at_window_end
    saved = Path(app.error.checkpoint)
    assert saved.is_dir() and saved.parent == tmp_path / "checkpoints"
    state = json.loads((saved / "state.json").read_text())["state"]
    assert state["accumulator"]["micro_step"] == 0 and state["window"]["micro"] == 0  # a window boundary
    # the window being filled when s was pressed was the last (its step, or the next if it closed meanwhile)
    assert state["step"] == learner.step and asked_at[0] <= learner.step <= asked_at[0] + 2 < 40 * 6


def test_k_kills_after_the_micro_batch_in_progress_without_a_checkpoint(tmp_path: Path) -> None:
    app, learner = _monitor(tmp_path, epochs=40, pace=0.1)

    async def run() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await _until(pilot, lambda: learner.step >= 1)
            await pilot.press("q", "k")
            await _until(pilot, lambda: app.done.is_set())

    asyncio.run(run())
    assert isinstance(app.error, TrainingAborted) and app.progress.kill_asked.is_set()
    assert learner.accumulator.micro_step > 0 or learner.step < 40 * 6  # stopped inside the run
    checkpoints = tmp_path / "checkpoints"
    assert not checkpoints.exists() or not any(p.is_dir() for p in checkpoints.iterdir())


# ---------------------------------------------------------------- events fed by hand
class _Feed:
    """A monitor over no training: the test posts the events; its clock moves when the test says."""

    def __init__(self) -> None:
        self.now = 0.0
        self.release = threading.Event()
        self.app = TrainingMonitor(MonitorProgress(unit="tokens"), self.release.wait, clock=lambda: self.now)

    def post(self, message: Any) -> None:
        self.app.post_message(message)


def _record(step: int, loss: float, epoch: int = 0) -> dict[str, Any]:
    return {"step": step, "epoch": epoch, "loss": loss, "accuracy": 1 / (1 + loss), "lr": 1e-3 * step,
            "grad_norm": 2.0 / step, "items_per_second": 1000.0 + step, "items": 512, "micro_batches": 4}


def _fed(check: Callable[[_Feed, Any], Any]) -> None:
    feed = _Feed()

    async def run() -> None:
        async with feed.app.run_test(size=SIZE) as pilot:
            try:
                await check(feed, pilot)
            finally:
                feed.release.set()  # the training thread returns: else the app would wait for it on the way out

    asyncio.run(run())


def test_the_eta_is_the_time_per_step_so_far_times_the_steps_left_from_where_the_run_resumed() -> None:
    async def check(feed: _Feed, pilot: Any) -> None:
        feed.post(RunStarted(20, "fed", num_epochs=2, pace=0.0))
        await pilot.pause()
        for step in range(11, 15):  # a resumed run: steps 1 to 10 were done before this start
            feed.now += 2.0
            feed.post(StepDone(_record(step, 1.0 / step)))
            await pilot.pause()  # handled at this time of the clock
        run_row = _content(feed.app, "#progress")[0]
        assert run_row.endswith("14 of 20 steps 70% ETA 12 s")  # 2 s a step, 6 steps left
        assert _content(feed.app, "#progress")[2] == "pace   full speed (--pace 0)"
        assert _content(feed.app, "#status")[5].startswith("tokens/s   1,014")

    _fed(check)


def test_the_end_of_training_while_the_monitor_is_being_taken_down_raises_nothing() -> None:
    # the suite once saw it: the training thread returned while a test's end unmounted the panels one
    # by one; the status panel was still there, the progress panel already gone (NoMatches)
    async def check(feed: _Feed, pilot: Any) -> None:
        feed.post(RunStarted(20, "fed", num_epochs=1, pace=0.0))
        await pilot.pause()
        await feed.app.query_one(RunProgress).remove()
        feed.post(TrainingEnded())
        await pilot.pause()
        assert feed.app.finished

    _fed(check)


def test_the_end_of_training_after_the_monitors_last_screen_is_gone_raises_nothing() -> None:
    # the suite saw this race too: the app's screen stack already empty when the training thread returned
    feed = _Feed()  # never run: no screen on its stack, as at the very end of a run
    feed.app.on_training_ended(TrainingEnded())
    assert feed.app.finished


@pytest.mark.parametrize("how", ["finished", "stopped", "killed", "failed"])
def test_the_end_of_training_says_how_the_run_ended_and_only_a_finished_one_stays_open(how: str) -> None:
    async def check(feed: _Feed, pilot: Any) -> None:
        exits: list[object] = []
        feed.app.exit = lambda *args, **kwargs: exits.append(args)  # type: ignore[method-assign]
        feed.post(RunStarted(4, "fed", num_epochs=1, pace=0.0))
        await pilot.pause()
        feed.now += 2.0
        feed.post(StepDone(_record(1, 1.0)))
        await pilot.pause()
        assert _content(feed.app, "#progress")[0].endswith("1 of 4 steps 25% ETA 6 s")
        if how == "stopped":
            feed.app.progress.stop_asked.set()
        elif how == "killed":
            feed.app.progress.kill_asked.set()
        elif how == "failed":
            feed.app.error = RuntimeError("the training thread raised")
        feed.post(TrainingEnded())
        await pilot.pause()
        assert _content(feed.app, "#status")[0] == f"{'mode':<11}{how}"
        assert _content(feed.app, "#window")[0] == f"run {how} after optimizer step 1"
        progress = _content(feed.app, "#progress")[0]
        assert progress.endswith("1 of 4 steps 25% done" if how == "finished" else "1 of 4 steps 25% ETA -")
        said = feed.app.query_one(Log).lines
        assert ("training finished: q closes the monitor" in said) == (how == "finished")
        assert len(exits) == (0 if how == "finished" else 1)  # a finished run waits for q

    _fed(check)


def test_recent_shows_the_last_steps_and_the_summary_the_runs_numbers() -> None:
    async def check(feed: _Feed, pilot: Any) -> None:
        feed.post(RunStarted(40, "fed"))
        for step in range(1, 41):
            feed.post(StepDone(_record(step, 5.0 - 0.1 * step + (0.5 if step == 30 else 0.0))))
        feed.post(ValidDone({"step": 40, "epoch": 0, "loss": 1.5, "accuracy": 0.4}))
        await pilot.pause(0.2)
        await pilot.press("down")
        plot = feed.app.query_one(MetricPlot)
        plot.redraw()
        assert plot.kind == "recent" and plot.drawn["train"][0] == list(range(40 - RECENT_STEPS + 1, 41))
        assert plot.drawn["valid"] == ([40], [1.5])
        await pilot.press("down")
        rows = {row.split()[0]: row.split()[1:] for row in _content(feed.app, "#metrics")[3:] if row}
        losses = [5.0 - 0.1 * s + (0.5 if s == 30 else 0.0) for s in range(1, 41)]
        assert rows["steps"] == ["40", "1"]
        assert rows["min"] == [f"{min(losses):.4g}", "1.5"] and rows["max"] == [f"{max(losses):.4g}", "1.5"]
        assert rows["mean"][0] == f"{sum(losses) / 40:.4g}"
        assert rows["best"] == ["(min)", "step", "40", "step", "40"]
        await pilot.press("left")  # from loss to the last tab: the rate, in the run's unit
        assert feed.app.query_one("#tabs").active == "tab-tokens-s"
        assert "tokens/s: summary of the run" in _content(feed.app, "#metrics")

    _fed(check)


def test_a_long_checkpoint_path_keeps_its_name_on_one_row() -> None:
    path = "/very/deep/" + "directory/" * 12 + "checkpoints/step0000004-epoch0001-batch000006"

    async def check(feed: _Feed, pilot: Any) -> None:
        feed.post(CheckpointSaved(4, path))
        await pilot.pause(0.2)
        rows = _content(feed.app, "#checkpoints")
        assert rows[0].startswith("step 4: …") and rows[0].endswith("step0000004-epoch0001-batch000006")
        assert rows[1:] == ["", ""]  # nothing wrapped onto the next rows
        _check_whole(feed.app)

    _fed(check)


def test_the_pace_spreads_a_window_over_its_micro_batches_and_is_automatic_for_a_small_run(tmp_path: Path) -> None:
    clock = [0.0]
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        clock[0] += seconds

    progress = MonitorProgress(pace=0.5, clock=lambda: clock[0], wait=wait)
    learner, train, valid = build_run({**_values(tmp_path, 1), "progress": progress})
    progress.watch(learner)
    learner.fit(train, valid)
    # the clock stands still while training here: each micro-batch of a window of 4 waits 1/4 of the pace
    assert waits == pytest.approx([0.125] * 23) and progress.waited == pytest.approx(0.125 * 23)
    assert auto_pace(12) == 1.0 and auto_pace(600) == 0.05  # at most 1 s a step; about 30 s a run
    automatic = MonitorProgress(pace=None)
    automatic.start(12, "a run of 12 steps")
    assert automatic.pace == 1.0


def test_pace_needs_the_monitor_and_seconds_of_at_least_0(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--pace", "0.5", "--dataset", "digits", "--epochs", "1", "--out", str(tmp_path)]) == 2
    assert "--pace slows the terminal monitor down to be watched: give it with --tui" in capsys.readouterr().err
    assert main(["train", "--tui", "--pace", "-1", "--out", str(tmp_path)]) == 2
    assert "--pace must be seconds >= 0, got -1.0" in capsys.readouterr().err


def test_without_a_terminal_tui_says_so_and_trains_with_plain_progress(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--tui", "--dataset", "digits", "--micro-batch", "256", "--accum", "2", "--epochs", "1",
                 "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "--tui needs a terminal" in captured.err and "showing the plain progress instead" in captured.err
    assert "trained 3 optimizer steps" in captured.out and "step 1 " in captured.out

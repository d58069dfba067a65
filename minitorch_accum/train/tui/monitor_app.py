"""The terminal monitor of a training run (Burn's TUI): a Textual app that trains in a worker thread.

    progress = MonitorProgress()
    learner = LearnerBuilder(out).progress(progress).build(model, optimizer)
    progress.watch(learner)
    app = TrainingMonitor(progress, lambda: learner.fit(train, valid))
    app.run()                       # app.result: fit's (model, history); app.error: what it raised

The Learner runs in a thread of the app's and calls ``progress`` there; the app draws what it
posts: train loss and accuracy per optimizer step with each validation's, the window filling,
its activation memory, items/s, lr and the checkpoints. ``q`` (or ctrl+q) asks the run to stop
at the end of the window being accumulated, which checkpoints; once the run is over, ``q``
closes the monitor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Footer, Header, Log

from minitorch_accum.train.tui.monitor_progress import (
    CheckpointSaved,
    MicroBatchDone,
    MonitorProgress,
    Note,
    RunStarted,
    StepDone,
    ValidDone,
)
from minitorch_accum.train.tui.monitor_widgets import CheckpointList, RunStats, SeriesPlot, WindowGauge

__all__ = ["TrainingEnded", "TrainingMonitor"]


class TrainingEnded(Message):
    """The training thread returned (or raised)."""


class TrainingMonitor(App[None]):
    """Shows a run live while ``train()`` (which calls Learner.fit with ``progress``) runs in a thread."""

    TITLE = "maccum train"
    CSS = """
    #plots { height: 1fr; }
    #panels { height: 9; }
    #window, #stats, #checkpoints { padding: 0 1; border: round $primary; }
    #window { width: 5fr; }
    #stats { width: 4fr; }
    #checkpoints { width: 4fr; }
    #log { height: 5; border: round $secondary; }
    """
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("q", "stop", "stop at the window's end (checkpoint)"),
        Binding("ctrl+q", "stop", "stop", priority=True, show=False),
    ]

    def __init__(self, progress: MonitorProgress, train: Callable[[], Any]) -> None:
        super().__init__()
        self.progress = progress
        progress.app = self
        self._train = train
        #: what ``train()`` returned, or raised (TrainingInterrupted after q or a signal)
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        #: set when the training thread has returned (or raised)
        self.done = threading.Event()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="plots"):
            yield SeriesPlot("loss per item", id="loss")
            yield SeriesPlot("accuracy", id="accuracy")
        with Horizontal(id="panels"):
            yield WindowGauge(id="window")
            yield RunStats(id="stats")
            yield CheckpointList(id="checkpoints")
        yield Log(id="log")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(0.3, self._redraw)
        self.run_worker(self._run, thread=True, exit_on_error=False, name="training")

    def _run(self) -> None:
        try:
            self.result = self._train()
        except BaseException as error:  # handed to the caller, who reports it
            self.error = error
        finally:
            self.done.set()
            self.post_message(TrainingEnded())

    def _redraw(self) -> None:
        for plot in self.query(SeriesPlot):
            plot.redraw()

    # ------------------------------------------------------------- what the run posts
    def on_run_started(self, message: RunStarted) -> None:
        self.sub_title = message.description
        self.query_one(RunStats).total_steps = message.total_steps

    def on_micro_batch_done(self, message: MicroBatchDone) -> None:
        self.query_one(WindowGauge).fill(message.step, message.micro, message.k, message.items, message.array_bytes)

    def on_step_done(self, message: StepDone) -> None:
        record = message.record
        self.query_one("#loss", SeriesPlot).add("train", record["step"], record["loss"])
        if record.get("accuracy") is not None:
            self.query_one("#accuracy", SeriesPlot).add("train", record["step"], record["accuracy"])
        self.query_one(RunStats).show_step(record)
        self.query_one(WindowGauge).closed(record["step"], self.query_one(WindowGauge).k)

    def on_valid_done(self, message: ValidDone) -> None:
        record = message.record
        self.query_one("#loss", SeriesPlot).add("valid", record["step"], record["loss"])
        if record.get("accuracy") is not None:
            self.query_one("#accuracy", SeriesPlot).add("valid", record["step"], record["accuracy"])

    def on_checkpoint_saved(self, message: CheckpointSaved) -> None:
        self.query_one(CheckpointList).add(message.step, message.path)

    def on_note(self, message: Note) -> None:
        self.query_one(Log).write_line(message.text)

    def on_training_ended(self, message: TrainingEnded) -> None:
        self.finished = True
        self._redraw()
        if self.progress.stop_asked.is_set() or self.error is not None:
            self.exit()
        else:
            self.query_one(Log).write_line("training finished: q closes the monitor")

    # ------------------------------------------------------------------------ keys
    def action_stop(self) -> None:
        if self.finished:
            self.exit()
            return
        if not self.progress.stop_asked.is_set():
            self.progress.stop_asked.set()
            self.query_one(Log).write_line("stopping at the end of this window, with a checkpoint ...")

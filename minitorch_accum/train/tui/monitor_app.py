"""The terminal monitor of a training run (Burn's TUI): a Textual app that trains in a worker thread.

    progress = MonitorProgress(pace=None)         # None: the automatic pace; 0: full speed
    learner = LearnerBuilder(out).progress(progress).build(model, optimizer)
    progress.watch(learner)
    app = TrainingMonitor(progress, lambda: learner.fit(train, valid))
    app.run()                       # app.result: fit's (model, history); app.error: what it raised

The Learner runs in a thread of the app's and calls ``progress`` there; the app draws what it
posts. As Burn's: metric tabs (loss, accuracy, lr, gradient norm, the rate; left and right),
each a plot of its full history, of its recent steps, or a summary (up and down); a status
panel; the run's progress with its ETA; ``q`` opens a popup: stop at the end of the window
being accumulated, with a checkpoint (``s``), kill now, without one (``k``), or cancel
(``c``). What Burn lacks: the micro-step within the window, the effective batch, the rate in
the run's unit (tokens/s), the gradient norm, the window's activation memory against one
batch of it, and the pace that lets a small task be watched. Once the run is over, ``q``
closes the monitor.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import App, ComposeResult, ScreenStackError
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widgets import Footer, Header, Log, Static, Tab, Tabs

from minitorch_accum.train.tui.monitor_popup import StopPopup
from minitorch_accum.train.tui.monitor_progress import (
    CheckpointSaved,
    MicroBatchDone,
    MonitorProgress,
    Note,
    RunStarted,
    StepDone,
    ValidDone,
)
from minitorch_accum.train.tui.monitor_series import MetricHistory, eta_seconds
from minitorch_accum.train.tui.monitor_widgets import (
    PLOT_KINDS,
    CheckpointList,
    MetricPlot,
    MetricSummary,
    RunProgress,
    StatusPanel,
    WindowPanel,
)

__all__ = ["TrainingEnded", "TrainingMonitor"]


class TrainingEnded(Message):
    """The training thread returned (or raised)."""


def _tab_id(metric: str) -> str:
    return "tab-" + "".join(c if c.isalnum() else "-" for c in metric)


class TrainingMonitor(App[None]):
    """Shows a run live while ``train()`` (which calls Learner.fit with ``progress``) runs in a thread.

    ``clock`` measures the run for its ETA (a test gives its own)."""

    TITLE = "maccum train"
    CSS = """
    #top { height: 1fr; }
    #metrics { width: 1fr; border: round $primary; }
    #kind { height: 1; color: $text-muted; padding: 0 1; }
    #summary { height: 1fr; padding: 1 1; display: none; }
    #side { width: 44; }
    #status, #window { height: auto; border: round $primary; padding: 0 1; }
    #status, #window, #summary { text-wrap: nowrap; text-overflow: ellipsis; }
    #progress { height: 5; border: round $primary; padding: 0 1; }
    #bottom { height: 5; }
    #checkpoints, #log { width: 1fr; border: round $secondary; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("q", "stop", "stop or close"),
        Binding("ctrl+q", "stop", "stop", priority=True, show=False),
        Binding("left", "metric(-1)", "metric", priority=True),
        Binding("right", "metric(1)", "metric", priority=True, show=False),
        Binding("up", "kind(-1)", "full / recent / summary", priority=True),
        Binding("down", "kind(1)", "plot kind", priority=True, show=False),
    ]

    def __init__(self, progress: MonitorProgress, train: Callable[[], Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.progress = progress
        progress.app = self
        self._train = train
        self._clock = clock
        self.history = MetricHistory(progress.unit)
        self.metric = self.history.metrics[0].name
        self.kind = PLOT_KINDS[0]
        #: what ``train()`` returned, or raised (TrainingInterrupted after a stop, TrainingAborted after a kill)
        self.result: Any = None
        self.error: BaseException | None = None
        self.finished = False
        #: set when the training thread has returned (or raised)
        self.done = threading.Event()
        self._total_steps = 0
        self._started_at = clock()
        self._steps_before: int | None = None  # optimizer steps done before this start (a resume)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="top"):
            with Vertical(id="metrics"):
                yield Tabs(*(Tab(m.name, id=_tab_id(m.name)) for m in self.history.metrics), id="tabs")
                yield Static("", id="kind", markup=False)
                yield MetricPlot(self.history, id="plot")
                yield MetricSummary(id="summary")
            with Vertical(id="side"):
                yield StatusPanel(self.progress.unit, id="status")
                yield WindowPanel(self.progress.unit, id="window")
        yield RunProgress(id="progress")
        with Horizontal(id="bottom"):
            yield CheckpointList(id="checkpoints")
            yield Log(id="log")
        yield Footer()

    def on_mount(self) -> None:
        for panel, title in (("#metrics", "metrics"), ("#status", "status"), ("#window", "window"),
                             ("#progress", "progress"), ("#checkpoints", "checkpoints"), ("#log", "log")):
            self.query_one(panel).border_title = title
        self._show_metric()
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
        # query, not query_one: the timer may fire once more while the app is taken down
        for plot in self.query(MetricPlot):
            plot.redraw()
        for table in self.query(MetricSummary) if self.kind == "summary" else ():
            table.show(self.history, self.metric)
        for panel in self.query(RunProgress):
            panel.set(waited=self.progress.waited)

    def _show_metric(self) -> None:
        summary = self.kind == "summary"
        plot, table = self.query_one(MetricPlot), self.query_one(MetricSummary)
        plot.display, table.display = not summary, summary
        if summary:
            table.show(self.history, self.metric)
        else:
            plot.show(self.metric, self.kind)
        names = {"full": "full history", "recent": "recent steps", "summary": "summary"}
        self.query_one("#kind", Static).update(
            "  ".join(f"▸{names[k]}" if k == self.kind else f" {names[k]}" for k in PLOT_KINDS)
            + "   ↑↓ kind  ←→ metric")

    # ------------------------------------------------------------- what the run posts
    def on_run_started(self, message: RunStarted) -> None:
        self.sub_title = message.description
        self._total_steps = message.total_steps
        self._started_at = self._clock()
        status = self.query_one(StatusPanel)
        status.mode, status.step, status.epoch = "training", (0, message.total_steps), (0, message.num_epochs)
        status.show()
        self.query_one(RunProgress).set(step=(0, message.total_steps), pace=message.pace)

    def on_micro_batch_done(self, message: MicroBatchDone) -> None:
        self.query_one(WindowPanel).fill(message.step, message.micro, message.k, message.items, message.array_bytes)
        status = self.query_one(StatusPanel)
        status.micro = (message.micro, message.k)
        status.show()
        self.query_one(RunProgress).set(micro=(message.micro, message.k))

    def on_step_done(self, message: StepDone) -> None:
        record = message.record
        step = record["step"]
        self.history.add_step(record)
        self.query_one(MetricPlot).changed()
        self.query_one(WindowPanel).closed(step)
        status = self.query_one(StatusPanel)
        status.record, status.step = record, (step, self._total_steps)
        status.epoch = (record["epoch"], status.epoch[1] if status.epoch else 1)
        status.show()
        if self._steps_before is None:
            self._steps_before = step - 1
        done = step - self._steps_before
        eta = eta_seconds(self._clock() - self._started_at, done, self._total_steps - step)
        self.query_one(RunProgress).set(step=(step, self._total_steps), eta=eta)

    def on_valid_done(self, message: ValidDone) -> None:
        self.history.add_valid(message.record)
        self.query_one(MetricPlot).changed()

    def on_checkpoint_saved(self, message: CheckpointSaved) -> None:
        self.query_one(CheckpointList).add(message.step, message.path)

    def on_note(self, message: Note) -> None:
        self.query_one(Log).write_line(message.text)

    def on_training_ended(self, message: TrainingEnded) -> None:
        self.finished = True
        try:
            self._show_the_end()
        except (NoMatches, ScreenStackError):
            # the monitor closed (q, or a test's end) before the training thread returned: its widgets
            # are gone, or going one by one (a panel found, the next one already unmounted), or its
            # last screen is already off the stack (the suite saw both)
            return

    def _show_the_end(self) -> None:
        if isinstance(self.screen, StopPopup):
            self.pop_screen()
        how = ("killed" if self.progress.kill_asked.is_set() else "stopped" if self.progress.stop_asked.is_set()
               else "failed" if self.error is not None else "finished")
        status = self.query_one(StatusPanel)
        status.mode = how
        status.show()
        self.query_one(WindowPanel).end(f"run {how}")
        self.query_one(RunProgress).set(finished=how == "finished", eta=None)
        self.query_one(MetricPlot).changed()
        self._redraw()
        if how != "finished":
            self.exit()
        else:
            self.query_one(Log).write_line("training finished: q closes the monitor")

    # ------------------------------------------------------------------------ keys
    def action_metric(self, delta: int) -> None:
        names = [m.name for m in self.history.metrics]
        self.metric = names[(names.index(self.metric) + delta) % len(names)]
        self.query_one(Tabs).active = _tab_id(self.metric)
        self._show_metric()

    def on_tabs_tab_activated(self, message: Tabs.TabActivated) -> None:
        chosen = next(m.name for m in self.history.metrics if _tab_id(m.name) == message.tab.id)
        if chosen != self.metric:
            self.metric = chosen
            self._show_metric()

    def action_kind(self, delta: int) -> None:
        self.kind = PLOT_KINDS[(PLOT_KINDS.index(self.kind) + delta) % len(PLOT_KINDS)]
        self._show_metric()

    def action_stop(self) -> None:
        if self.finished:
            self.exit()
            return
        if not isinstance(self.screen, StopPopup):
            self.push_screen(StopPopup(self.progress.last_checkpoint()), self._stop_chosen)

    def _stop_chosen(self, choice: str | None) -> None:
        if self.finished or choice not in ("s", "k"):
            return
        status = self.query_one(StatusPanel)
        log = self.query_one(Log)
        if choice == "s":
            self.progress.ask_stop()
            status.mode = "stopping at the window's end"
            log.write_line("stopping at the end of this window, with a checkpoint ...")
        else:
            self.progress.ask_kill()
            status.mode = "killing after this micro-batch"
            log.write_line("killing after the micro-batch in progress, without a checkpoint ...")
        status.show()

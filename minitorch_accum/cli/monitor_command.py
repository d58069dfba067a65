"""``maccum train --tui``: the run shown in the terminal monitor (``train/tui``), or why it cannot be."""

from __future__ import annotations

import signal
import sys
from collections.abc import Mapping
from typing import Any

from minitorch_accum.cli.training_run import build_run
from minitorch_accum.train import History, TrainingAborted, TrainingInterrupted
from minitorch_accum.train.tui import tui_missing

__all__ = ["UNITS", "monitor_unavailable", "train_with_monitor"]

#: what the items of each built-in task are (the monitor's rate is named by them: tokens/s for the text tasks)
UNITS = {"digits": "images", "sequences": "tokens", "chars": "tokens"}


def monitor_unavailable() -> str | None:
    """None when the monitor can run here, else what it needs (said before falling back)."""
    missing = tui_missing()
    if missing is not None:
        return f"needs the {missing} package (pip install 'minitorch_accum[tui]')"
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return "needs a terminal (standard input and output are not one here)"
    return None


def train_with_monitor(values: Mapping[str, Any]) -> History | None:
    """Train as ``run_training`` does, shown in the monitor at ``--pace`` (None: the automatic pace);
    None when q stopped the run (said here). A kill (q, then k) is said here and raised on
    (TrainingAborted: ``maccum train`` exits with status 130)."""
    from minitorch_accum.train.tui.monitor_app import TrainingMonitor
    from minitorch_accum.train.tui.monitor_progress import MonitorProgress

    progress = MonitorProgress(pace=values["pace"], unit=UNITS.get(values["dataset"], "items"))
    learner, train, valid = build_run({**values, "progress": progress})
    progress.watch(learner)
    app = TrainingMonitor(progress, lambda: learner.fit(train, valid, resume=values["resume"],
                                                        overwrite=values["overwrite"]))
    # the Learner trains in the monitor's thread, where signals cannot be caught: they are caught
    # here, on the main thread, into the same stop request (Ctrl-C and SIGTERM behave as without it)
    with learner.stop_request.installed():
        app.run()
        if not app.done.is_set():  # the monitor closed on its own: stop the run at a safe point
            learner.stop_request.signal = signal.SIGINT
            app.done.wait()
    if app.error is not None:
        if isinstance(app.error, TrainingAborted) and progress.kill_asked.is_set():
            last = progress.last_checkpoint()
            print(f"maccum train: killed with q, k in the window of optimizer step {learner.step + 1}, without a "
                  "checkpoint; "
                  + (f"--resume goes on from {last}" if last is not None else "no checkpoint was saved"),
                  file=sys.stderr)
            raise app.error
        if isinstance(app.error, TrainingInterrupted) and progress.stopped_at_window_end:
            print(f"maccum train: stopped with q at the end of optimizer step {learner.step}'s window; saved "
                  f"{app.error.checkpoint}; {learner.resume_hint}")
            return None
        raise app.error
    _, history = app.result
    return history

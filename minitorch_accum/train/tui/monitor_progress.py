"""The Progress the Learner calls while the terminal monitor shows the run.

The Learner calls it in the thread that trains; it reads what the Learner exposes (the
accumulator's window, the window's memory, the checkpoints, the validation history) and
posts one message per event to the monitor app, whose own thread draws (Textual's
``post_message`` may be called from any thread). A stop asked for in the app (``q``) is
handed to the Learner's stop request when a window closes, so the run stops at a window
boundary and checkpoints there.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from textual.message import Message

from minitorch_accum.train.progress import Progress

__all__ = ["CheckpointSaved", "MicroBatchDone", "MonitorProgress", "Note", "RunStarted", "StepDone", "ValidDone"]


class RunStarted(Message):
    def __init__(self, total_steps: int, description: str) -> None:
        super().__init__()
        self.total_steps = total_steps
        self.description = description


class MicroBatchDone(Message):
    """Micro-batch ``micro`` of ``k`` of the window that optimizer step ``step`` + 1 closes;
    ``items`` of the window so far; ``array_bytes``: the activation arrays of the largest
    micro-batch of this window so far (None where arrays are not told apart)."""

    def __init__(self, step: int, micro: int, k: int, items: int, array_bytes: int | None) -> None:
        super().__init__()
        self.step, self.micro, self.k, self.items, self.array_bytes = step, micro, k, items, array_bytes


class _Record(Message):
    """A metrics line the Learner wrote, handed to the app."""

    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__()
        self.record = record


class StepDone(_Record):
    """An optimizer step and its metrics line (``train/metrics.py``)."""


class ValidDone(_Record):
    """A validation: loss, accuracy, epoch and step."""


class CheckpointSaved(Message):
    def __init__(self, step: int, path: str) -> None:
        super().__init__()
        self.step = step
        self.path = path


class Note(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class MonitorProgress(Progress):
    """Posts the Learner's events to ``app`` (set by the app); ``watch(learner)`` before fit."""

    def __init__(self) -> None:
        self.app: Any = None
        self.learner: Any = None
        self.stop_asked = threading.Event()
        self.stopped_at_window_end = False
        self._valid_seen = 0
        self._checkpoint: Any = None

    def watch(self, learner: Any) -> None:
        """Read ``learner``'s window, checkpoints and history, and stop it through its stop request."""
        self.learner = learner

    def _post(self, message: Message) -> None:
        if self.app is not None:
            self.app.post_message(message)

    def _checkpoints(self) -> None:
        (position, path) = self.learner.checkpoints.last_saved
        if path is not None and path != self._checkpoint:
            self._checkpoint = path
            self._post(CheckpointSaved(position[0] if position else 0, str(path)))

    def start(self, total_steps: int, description: str) -> None:
        self._post(RunStarted(total_steps, description))

    def micro_batch(self, step: int, micro: int, k: int) -> None:
        learner = self.learner
        self._post(MicroBatchDone(step, micro, k, learner.accumulator.items_seen, learner.window.array_peak))
        self._checkpoints()

    def step(self, record: dict[str, Any]) -> None:
        self._post(StepDone(dict(record)))
        self._checkpoints()
        if self.stop_asked.is_set() and self.learner.stop_request.signal is None:
            # the window has closed: the Learner stops here, as on Ctrl-C, and checkpoints
            self.stopped_at_window_end = True
            self.learner.stop_request.signal = signal.SIGINT

    def message(self, text: str) -> None:
        valid = self.learner.history.valid
        for record in valid[self._valid_seen:]:
            self._post(ValidDone(dict(record)))
        self._valid_seen = len(valid)
        self._checkpoints()
        self._post(Note(text))

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
from dataclasses import dataclass
from typing import Any

from textual.message import Message

from minitorch_accum.train.progress import Progress

__all__ = ["CheckpointSaved", "MicroBatchDone", "MonitorProgress", "Note", "RunStarted", "StepDone", "ValidDone"]


# Textual's messages may be dataclasses (Message.__post_init__ sets up what its __init__ would);
# eq=False keeps them compared and hashed by identity, as a Message is
@dataclass(eq=False)
class RunStarted(Message):
    """The run begins: the optimizer steps it will take in all, and what it trains (a line)."""

    total_steps: int
    description: str


@dataclass(eq=False)
class MicroBatchDone(Message):
    """Micro-batch ``micro`` of ``k`` of the window that optimizer step ``step`` + 1 closes;
    ``items`` of the window so far; ``array_bytes``: the activation arrays of the largest
    micro-batch of this window so far (None where arrays are not told apart)."""

    step: int
    micro: int
    k: int
    items: int
    array_bytes: int | None


@dataclass(eq=False)
class _Record(Message):
    """A metrics line the Learner wrote, handed to the app."""

    record: dict[str, Any]


class StepDone(_Record):
    """An optimizer step and its metrics line (``train/metrics.py``)."""


class ValidDone(_Record):
    """A validation: loss, accuracy, epoch and step."""


@dataclass(eq=False)
class CheckpointSaved(Message):
    """A checkpoint written at ``path`` after optimizer step ``step``."""

    step: int
    path: str


@dataclass(eq=False)
class Note(Message):
    """A line the Learner says (resumed from, a numerics difference, a validation's result)."""

    text: str


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

"""The Progress the Learner calls while the terminal monitor shows the run.

The Learner calls it in the thread that trains; it reads what the Learner exposes (the
accumulator's window, the window's memory, the checkpoints, the validation history) and
posts one message per event to the monitor app, whose own thread draws (Textual's
``post_message`` may be called from any thread). What the app asks of the run goes through
it: a stop (``ask_stop``) is handed to the Learner's stop request when a window closes, so
the run stops at a window boundary and checkpoints there; a kill (``ask_kill``) stops after
the micro-batch in progress, without a checkpoint, as a second Ctrl-C does.

``pace``: seconds an optimizer step takes at least, so that a small task can be watched; each
micro-batch of a window of k waits, if it came sooner, until pace x i/k seconds after the
window began (the Learner's own timings, and so its items/s, leave the wait out). None: the
automatic pace, which stretches a run of N steps to about AUTO_PACE_SECONDS, at most
MAX_AUTO_PACE a step (a run that is slower already is not slowed); 0: full speed.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual.message import Message

from minitorch_accum.train.progress import Progress

__all__ = ["AUTO_PACE_SECONDS", "MAX_AUTO_PACE", "CheckpointSaved", "MicroBatchDone", "MonitorProgress", "Note",
           "RunStarted", "StepDone", "ValidDone", "auto_pace"]

#: the automatic pace stretches a run to about this many seconds ...
AUTO_PACE_SECONDS = 30.0
#: ... at most this many seconds an optimizer step
MAX_AUTO_PACE = 1.0


def auto_pace(total_steps: int) -> float:
    """Seconds per optimizer step that make a run of ``total_steps`` last about AUTO_PACE_SECONDS."""
    return min(MAX_AUTO_PACE, AUTO_PACE_SECONDS / max(total_steps, 1))


# Textual's messages may be dataclasses (Message.__post_init__ sets up what its __init__ would);
# eq=False keeps them compared and hashed by identity, as a Message is
@dataclass(eq=False)
class RunStarted(Message):
    """The run begins: the optimizer steps it will take in all, what it trains (a line), its epochs
    and the pace it is shown at (seconds per optimizer step at least, 0: full speed)."""

    total_steps: int
    description: str
    num_epochs: int = 1
    pace: float = 0.0


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
    """Posts the Learner's events to ``app`` (set by the app); ``watch(learner)`` before fit.

    ``unit``: what the run's items are (``tokens`` for a language model), shown in the rate's name.
    ``clock`` and ``wait`` measure and spend the pace's time (a test gives its own)."""

    def __init__(self, pace: float | None = 0.0, unit: str = "items", clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[float], Any] | None = None) -> None:
        if pace is not None and not (isinstance(pace, int | float) and pace >= 0):
            raise ValueError(f"pace must be None (automatic) or seconds >= 0, got {pace!r}")
        self.app: Any = None
        self.learner: Any = None
        self.unit = unit
        #: the pace asked for (None: automatic), and the one in use once the run started
        self.pace_asked = pace
        self.pace = 0.0 if pace is None else float(pace)
        #: seconds spent waiting for the pace so far
        self.waited = 0.0
        self.stop_asked = threading.Event()
        self.kill_asked = threading.Event()
        self.stopped_at_window_end = False
        self._clock = clock
        self._wake = threading.Event()  # a stop or a kill ends a pace's wait at once
        self._wait = wait or self._wake.wait
        self._window_began = clock()
        self._valid_seen = 0
        self._checkpoint: Any = None

    def watch(self, learner: Any) -> None:
        """Read ``learner``'s window, checkpoints and history, and stop it through its stop request."""
        self.learner = learner

    # ------------------------------------------------------------ what the app asks
    def ask_stop(self) -> None:
        """Stop at the end of the window being accumulated, with a checkpoint."""
        self.stop_asked.set()
        self._wake.set()

    def ask_kill(self) -> None:
        """Stop after the micro-batch in progress, without a checkpoint (the Learner raises
        TrainingAborted; a resume goes on from the last checkpoint saved)."""
        self.kill_asked.set()
        if self.learner is not None:
            self.learner.stop_request.abort_pending = True
        self._wake.set()

    def last_checkpoint(self) -> str | None:
        """What a resume would go on from now: the last checkpoint saved, or the one this run resumed from."""
        if self.learner is None:
            return None
        checkpoints = self.learner.checkpoints
        path = checkpoints.last_saved[1] or checkpoints.restored_from
        return None if path is None else str(path)

    # ------------------------------------------------------------ what the Learner calls
    def _post(self, message: Message) -> None:
        if self.app is not None:
            self.app.post_message(message)

    def _checkpoints(self) -> None:
        (position, path) = self.learner.checkpoints.last_saved
        if path is not None and path != self._checkpoint:
            self._checkpoint = path
            self._post(CheckpointSaved(position[0] if position else 0, str(path)))

    def _pace_until(self, moment: float) -> None:
        now = self._clock()
        if moment > now and not self._wake.is_set():
            self._wait(moment - now)
            self.waited += self._clock() - now

    def start(self, total_steps: int, description: str) -> None:
        if self.pace_asked is None:
            self.pace = auto_pace(total_steps)
        epochs = self.learner.config.num_epochs if self.learner is not None else 1
        self._post(RunStarted(total_steps, description, epochs, self.pace))
        self._window_began = self._clock()

    def micro_batch(self, step: int, micro: int, k: int) -> None:
        learner = self.learner
        self._post(MicroBatchDone(step, micro, k, learner.accumulator.items_seen, learner.window.array_peak))
        self._checkpoints()
        if self.pace:
            self._pace_until(self._window_began + self.pace * micro / k)

    def step(self, record: dict[str, Any]) -> None:
        self._post(StepDone(dict(record)))
        self._checkpoints()
        self._window_began = self._clock()
        if self.stop_asked.is_set() and self.learner.stop_request.signal is None:
            # the window has closed: the Learner stops here, as on Ctrl-C, and checkpoints
            self.stopped_at_window_end = True
            self.learner.stop_request.signal = signal.SIGINT

    def stop(self) -> None:
        self._checkpoints()  # the last one may have been saved after the last step's call (an epoch's end)

    def message(self, text: str) -> None:
        valid = self.learner.history.valid
        for record in valid[self._valid_seen:]:
            self._post(ValidDone(dict(record)))
        self._valid_seen = len(valid)
        self._checkpoints()
        self._post(Note(text))

"""Stopping a run cleanly on Ctrl-C or SIGTERM: finish the micro-batch (or, data-parallel,
the window), checkpoint, then stop with the signal's exit status.

Data-parallel, a signal reaches one rank or several, at any moment. A rank never acts on its own
signal: it raises its request in the next window's facts (``DataParallel.stop_requested``), and
every rank stops at the end of the window whose facts carry a request (``stop_agreed``), with the
same signal (``agreed_signal``), so all save one checkpoint together and exit with one status.
A rank that acted alone would save (a collective) while the others went on into the next
window's reduction: both would wait for ever.

The handlers are in place for the whole of ``fit``, from taking the directory's lock to the last
byte of ``final.safetensors``: a signal before the first micro-batch stops there with a checkpoint of
the start (``maccum train`` holds one from its first line and hands it over); one after the last
optimizer step lets the final parameters be written and then stops with the signal's status, the
run complete (TrainingInterrupted with ``complete``). A signal never leaves a run with neither.

A second Ctrl-C before that checkpoint is saved stops at once, without one (TrainingAborted,
exit status 130), saying so on stderr: the user asked twice, and the last checkpoint saved
is intact, since a save is atomic (its temporary directory is removed on the way out). After
it is saved, and once the training loop is over (the final parameters are being written), a
second Ctrl-C is ignored with a message: the stop is already under way and nothing is left to
lose, or stopping would lose the whole run. Its exception is never raised inside a memory
probe's own bookkeeping (which the native module keeps free of Python code; the ctypes fallback
is not): there it waits for the micro-batch to end."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from minitorch_accum.distributed import Communicator
from minitorch_accum.observe.memory import probe_bookkeeping_running

__all__ = ["StopRequest", "TrainingAborted", "TrainingInterrupted"]


class TrainingInterrupted(KeyboardInterrupt):
    """fit() stopped on a signal after saving a checkpoint, or (``complete``) after the last step and
    the final parameters; ``exit_status`` is 128 + the signal (130 for Ctrl-C, 143 for SIGTERM),
    what a shell reports for a process the signal ended."""

    def __init__(self, signum: int, checkpoint: Any, step: int | None = None, comm: Communicator | None = None,
                 complete: bool = False) -> None:
        if complete:  # the signal came after the last optimizer step: the final parameters were written first
            written = f"wrote {checkpoint}" if checkpoint is not None else "rank 0 wrote final.safetensors"
            text = (f"interrupted by signal {signum} after the run completed ({step} optimizer steps); {written}: "
                    "the run is complete, nothing to resume")
        else:
            at = "" if step is None else f" after optimizer step {step}"
            saved = f"saved {checkpoint}" if checkpoint is not None else "rank 0 saved the checkpoint"
            text = f"interrupted by signal {signum}{at}; {saved}"
        super().__init__(text)
        self.signum = signum
        #: the checkpoint saved, or with ``complete`` the final parameters' file (None on ranks other than 0)
        self.checkpoint = checkpoint
        self.step = step
        self.comm = comm  # data-parallel: every rank raised it at the same window end
        #: the run had finished (``final.safetensors`` written) when it stopped
        self.complete = complete

    def wait_for_every_rank(self) -> None:
        """Data-parallel: return once every rank has reported its stop (the first rank to exit ends the job)."""
        if self.comm is not None and self.comm.world_size > 1:
            self.comm.agree(False)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class TrainingAborted(KeyboardInterrupt):
    """fit() stopped at once on a second Ctrl-C, without saving a checkpoint (the window may
    have been half-written); a resume goes on from the last checkpoint saved."""

    exit_status = 130

    def __init__(self) -> None:
        super().__init__("stopped at once by a second Ctrl-C, without saving a checkpoint; "
                         "a resume goes on from the last checkpoint saved")


def _say(text: str) -> None:
    # straight to the file descriptor: a signal handler may run while sys.stderr is mid-write
    with contextlib.suppress(OSError):
        os.write(2, (text + "\n").encode())


class StopRequest:
    """Ctrl-C or SIGTERM during fit: remembered, acted on at the next safe point.

    A second Ctrl-C stops at once, without a checkpoint, or, once the stop's checkpoint is
    saved (``saved()``) or the training loop is over (``finishing()``), is ignored with a
    message (see the module docstring). ``signal`` may be set before the handlers are installed
    (a signal caught earlier by the caller): it is acted on at the first safe point."""

    def __init__(self) -> None:
        self.signal: int | None = None
        #: a second Ctrl-C came while a probe's bookkeeping ran: raise at the micro-batch's end
        self.abort_pending = False
        self._saved = False
        self._leaving = False
        self._finishing = False
        self._aborting = False

    def saved(self) -> None:
        """The checkpoint of this stop is written: a second Ctrl-C from now on is ignored."""
        self._saved = True

    def finishing(self) -> None:
        """The last optimizer step is taken and the final parameters are being written: a second
        Ctrl-C from now on is ignored (stopping at once would leave neither them nor a checkpoint)."""
        self._finishing = True

    def abort_if_pending(self) -> None:
        """Raise the TrainingAborted that a second Ctrl-C deferred (call it between micro-batches)."""
        if self.abort_pending:
            self.abort_pending = False
            self._aborting = True
            raise TrainingAborted

    def agreed_signal(self, comm: Communicator) -> int:
        """The signal every rank stops with (a collective: every rank calls it at the same window
        end): SIGTERM if any rank received one (a scheduler ending the job), else SIGINT."""
        mine = np.array([self.signal or 0], dtype=np.int64)
        if comm.world_size == 1:
            return int(mine[0]) or signal.SIGINT
        every = np.empty(comm.world_size, dtype=np.int64)
        comm.allgather(mine, every)
        return signal.SIGTERM if signal.SIGTERM in every else signal.SIGINT

    def _ignoring_why(self) -> str | None:
        if self._saved:
            return "the run is already stopping (its checkpoint is saved)"
        if self._finishing:
            return "the run is writing its final parameters"
        if self._leaving or self._aborting:
            return "the run is already stopping"
        return None

    @contextlib.contextmanager
    def installed(self) -> Iterator[StopRequest]:
        """Catch SIGINT and SIGTERM into this request while the block runs (on the main thread;
        elsewhere, nothing is installed and the caller catches them). Yields the request."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return

        def handler(signum: int, frame: Any) -> None:
            if self.signal is None or signum != signal.SIGINT:
                self.signal = signum
                return
            why = self._ignoring_why()
            if why is not None:
                _say(f"Ctrl-C again: ignored, {why}")
                return
            if self.abort_pending:
                return  # said so already
            _say(f"Ctrl-C again: {TrainingAborted()}")
            if probe_bookkeeping_running(frame):
                self.abort_pending = True  # raised when the micro-batch ends
                return
            self._aborting = True  # a third Ctrl-C must not cut short the way out (a save's cleanup)
            raise TrainingAborted

        self._saved = self._leaving = self._finishing = self._aborting = self.abort_pending = False
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield self
        finally:
            self._leaving = True  # a late Ctrl-C must not cut the restoring short
            for sig, old in previous.items():
                signal.signal(sig, old)

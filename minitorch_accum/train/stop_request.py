"""Stopping a run cleanly on Ctrl-C or SIGTERM: finish the micro-batch (or, data-parallel,
the window), checkpoint, then stop with the signal's exit status.

Data-parallel, a signal reaches one rank or several, at any moment. A rank never acts on its own
signal: it raises its request in the next window's facts (``DataParallel.stop_requested``), and
every rank stops at the end of the window whose facts carry a request (``stop_agreed``), with the
same signal (``agreed_signal``), so all save one checkpoint together and exit with one status.
A rank that acted alone would save (a collective) while the others went on into the next
window's reduction: both would wait for ever.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from minitorch_accum.distributed import Communicator

__all__ = ["StopRequest", "TrainingInterrupted"]


class TrainingInterrupted(KeyboardInterrupt):
    """fit() stopped on a signal after saving a checkpoint; ``exit_status`` is 128 + the signal
    (130 for Ctrl-C, 143 for SIGTERM), what a shell reports for a process the signal ended."""

    def __init__(self, signum: int, checkpoint: Any, step: int | None = None, comm: Communicator | None = None) -> None:
        at = "" if step is None else f" after optimizer step {step}"
        saved = f"saved {checkpoint}" if checkpoint is not None else "rank 0 saved the checkpoint"
        super().__init__(f"interrupted by signal {signum}{at}; {saved}")
        self.signum = signum
        self.checkpoint = checkpoint
        self.step = step
        self.comm = comm  # data-parallel: every rank raised it at the same window end

    def wait_for_every_rank(self) -> None:
        """Data-parallel: return once every rank has reported its stop (the first rank to exit ends the job)."""
        if self.comm is not None and self.comm.world_size > 1:
            self.comm.agree(False)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class StopRequest:
    """Ctrl-C or SIGTERM during fit: remembered, acted on at the next safe point.

    A second Ctrl-C stops at once (without a checkpoint, since the window may then be
    half-written)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def agreed_signal(self, comm: Communicator) -> int:
        """The signal every rank stops with (a collective: every rank calls it at the same window
        end): SIGTERM if any rank received one (a scheduler ending the job), else SIGINT."""
        mine = np.array([self.signal or 0], dtype=np.int64)
        if comm.world_size == 1:
            return int(mine[0]) or signal.SIGINT
        every = np.empty(comm.world_size, dtype=np.int64)
        comm.allgather(mine, every)
        return signal.SIGTERM if signal.SIGTERM in every else signal.SIGINT

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self.signal is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.signal = signum

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

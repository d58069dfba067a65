"""Stopping a run cleanly on Ctrl-C or SIGTERM: finish the micro-batch (or, data-parallel,
the window), checkpoint, then stop with the signal's exit status."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["StopRequest", "TrainingInterrupted"]


class TrainingInterrupted(KeyboardInterrupt):
    """fit() stopped on a signal after saving a checkpoint; ``exit_status`` is 128 + the signal
    (130 for Ctrl-C, 143 for SIGTERM), what a shell reports for a process the signal ended."""

    def __init__(self, signum: int, checkpoint: Any) -> None:
        super().__init__(f"interrupted by signal {signum}; saved {checkpoint}")
        self.signum = signum
        self.checkpoint = checkpoint

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


class StopRequest:
    """Ctrl-C or SIGTERM during fit: remembered, acted on at the next safe point.

    A second Ctrl-C stops at once (without a checkpoint, since the window may then be
    half-written)."""

    def __init__(self) -> None:
        self.signal: int | None = None

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

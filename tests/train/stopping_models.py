"""A step model that stops its run at a chosen micro-batch, as a user (Ctrl-C, SIGTERM) or a crash would."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

from minitorch_accum import nn
from minitorch_accum.train import Classifier

__all__ = ["StopAt", "crash", "send"]


def send(signum: int = signal.SIGINT, times: int = 1) -> Callable[[], None]:
    """``signum`` sent to this process ``times`` times (Ctrl-C by default; each is handled before the
    next is sent)."""
    def stop() -> None:
        for _ in range(times):
            os.kill(os.getpid(), signum)
    return stop


def crash() -> None:
    """Out of train_step before the micro-batch runs, as a kill would end it (no stop request)."""
    raise KeyboardInterrupt


class StopAt(Classifier):
    """Calls ``stop`` (Ctrl-C by default) during its ``at``-th micro-batch (counted from 1), before it trains."""

    def __init__(self, module: nn.Module, at: int, stop: Callable[[], object] | None = None) -> None:
        super().__init__(module)
        self.at, self.stop, self.calls = at, stop or send(), 0

    def train_step(self, batch: object) -> object:
        self.calls += 1
        if self.calls == self.at:
            self.stop()
        return super().train_step(batch)

"""The rate of each optimizer step under a scheduler: this library's, and a torch scheduler's
driving a torch optimizer as a training loop does (the rate read, the step, then the scheduler)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


def rates(scheduler: Any, n: int) -> list[float]:
    """The rates of ``n`` optimizer steps under one of this library's schedulers."""
    return [scheduler.step() for _ in range(n)]


def torch_rates(make: Callable[[Any], Any], base_lr: float, n: int) -> list[float]:
    """The rate each of ``n`` optimizer steps uses under the torch scheduler ``make(optimizer)`` gives,
    stepped after each step; skips the test where torch is not installed."""
    torch = pytest.importorskip("torch")
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base_lr)
    scheduler = make(optimizer)
    found = []
    for _ in range(n):
        found.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return found

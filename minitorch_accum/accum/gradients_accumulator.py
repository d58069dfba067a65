"""Burn's GradientsAccumulator: sum whole Gradients containers, micro-batch by micro-batch.

Kept beside the arena for study and comparison: every micro-batch allocates a fresh
container and every add allocates a fresh array (``new = old + g``: 12 bytes per
fp32 element plus an allocation), where the arena writes in place. Unlike Burn, the
Accumulator built on it still normalizes the window (Burn's docs ask the user to
lower the learning rate by hand instead).
"""

from __future__ import annotations

from minitorch_accum.autodiff import Gradients
from minitorch_accum.nn import Module

__all__ = ["GradientsAccumulator"]


class GradientsAccumulator:
    """``accumulate(model, grads)`` adds a container; ``grads()`` takes the sum and resets."""

    def __init__(self) -> None:
        self._sum: Gradients | None = None

    def accumulate(self, model: Module, grads: Gradients) -> None:
        """Add the gradients of ``model``'s parameters found in ``grads``."""
        if self._sum is None:
            self._sum = Gradients()
        for param in model.parameters():
            grad = grads.get(param)
            if grad is None:
                continue
            previous = self._sum.get(param)
            self._sum.set(param, grad if previous is None else previous + grad)

    def grads(self) -> Gradients:
        """The summed gradients; the accumulator starts empty again."""
        out = self._sum if self._sum is not None else Gradients()
        self._sum = None
        return out

    def peek(self) -> Gradients | None:
        """The running sum without resetting (None before the first accumulate)."""
        return self._sum

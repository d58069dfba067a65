"""Learning-rate schedules, advanced once per optimizer step (never per micro-batch).

Each scheduler is a pure function of the step count (``lr_at(step)``) plus a
counter, so resuming from a checkpoint only needs the counter.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

__all__ = ["ConstantLR", "CosineAnnealingLR", "LRScheduler", "LinearWarmupLR", "StepLR"]


class LRScheduler(ABC):
    """``step()`` returns the learning rate for the next optimizer step and advances."""

    def __init__(self) -> None:
        self.steps_taken = 0

    @abstractmethod
    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (0-based)."""

    def current(self) -> float:
        """The rate the next ``step()`` will return, without advancing."""
        return self.lr_at(self.steps_taken)

    def step(self) -> float:
        lr = self.lr_at(self.steps_taken)
        self.steps_taken += 1
        return lr

    def state_dict(self) -> dict[str, Any]:
        return {"steps_taken": self.steps_taken}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps_taken = int(state["steps_taken"])


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


class ConstantLR(LRScheduler):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = _positive("lr", lr)

    def lr_at(self, step: int) -> float:
        return self.lr


class LinearWarmupLR(LRScheduler):
    """Linear ramp from ``start_factor * lr`` to ``lr`` over ``warmup_steps``, then constant."""

    def __init__(self, lr: float, warmup_steps: int, start_factor: float = 0.0) -> None:
        super().__init__()
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.lr = _positive("lr", lr)
        self.warmup_steps = warmup_steps
        self.start_factor = start_factor

    def lr_at(self, step: int) -> float:
        if step >= self.warmup_steps:
            return self.lr
        # the first step gets a small non-zero rate: (step + 1) / warmup of the way up
        fraction = (step + 1) / self.warmup_steps
        return self.lr * (self.start_factor + (1.0 - self.start_factor) * fraction)


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from ``lr`` to ``min_lr`` over ``total_steps``, after an optional linear warmup."""

    def __init__(self, lr: float, total_steps: int, min_lr: float = 0.0, warmup_steps: int = 0) -> None:
        super().__init__()
        if total_steps <= 0 or warmup_steps < 0 or warmup_steps >= total_steps + 1:
            raise ValueError(f"need total_steps > 0 and 0 <= warmup_steps <= total_steps, got "
                             f"total_steps={total_steps}, warmup_steps={warmup_steps}")
        self.lr = _positive("lr", lr)
        self.total_steps = total_steps
        self.min_lr = min_lr
        self.warmup_steps = warmup_steps

    def lr_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        span = max(self.total_steps - self.warmup_steps, 1)
        progress = min(step - self.warmup_steps, span) / span
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * progress))


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` optimizer steps."""

    def __init__(self, lr: float, step_size: int, gamma: float = 0.1) -> None:
        super().__init__()
        if step_size <= 0:
            raise ValueError(f"step_size must be positive, got {step_size}")
        self.lr = _positive("lr", lr)
        self.step_size = step_size
        self.gamma = gamma

    def lr_at(self, step: int) -> float:
        return self.lr * self.gamma ** (step // self.step_size)

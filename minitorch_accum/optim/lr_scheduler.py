"""Learning-rate schedules, advanced once per optimizer step (never per micro-batch).

Each scheduler is a pure function of the step count (``lr_at(step)``) plus a
counter, so resuming from a checkpoint only needs the counter.

PyTorch's schedulers take the optimizer and rewrite its groups' rates; these take the base
rate (``opt.lr``, or ``max_lr`` for OneCycleLR) and hand the step's rate to ``opt.step(...,
lr=)``, which scales every group by it (the Learner does that once per optimizer step). The
values match PyTorch's step for step: ``LambdaLR``, ``OneCycleLR``, ``SequentialLR`` and
``StepLR`` exactly, ``CosineAnnealingLR`` to rounding within its ``total_steps`` (PyTorch steps
it recursively; after ``total_steps`` this one stays at ``min_lr`` where PyTorch's rises again).

A warmup of W steps ramps linearly, but the peers disagree on where the ramp starts, so each
convention is offered by name (``warmup=``, ``WARMUPS``): ``"linear"`` (this library's, and the
default) gives step s the fraction (s + 1) / W, so the first step moves and step W - 1 has the full
rate; ``"nanogpt"`` is nanoGPT's ``get_lr``, (s + 1) / (W + 1), which never reaches the full rate
inside the warmup; ``"huggingface"`` is transformers' ``get_*_schedule_with_warmup``, s / W, whose
first step has rate 0 (which the optimizers accept, as PyTorch's do).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

from minitorch_accum.optim.hyperparameter_checks import check_positive
from minitorch_accum.optim.optimizer import Optimizer

__all__ = ["WARMUPS", "ConstantLR", "CosineAnnealingLR", "LRScheduler", "LambdaLR", "LinearWarmupLR", "OneCycleLR",
           "SequentialLR", "StepLR"]

#: the warmup conventions by name, each the fraction of the rate at 0-based step s of a warmup of W steps
WARMUPS: dict[str, tuple[str, Callable[[int, int], float]]] = {
    "linear": ("(step + 1) / W", lambda step, warmup: (step + 1) / warmup),
    "nanogpt": ("(step + 1) / (W + 1)", lambda step, warmup: (step + 1) / (warmup + 1)),
    "huggingface": ("step / W", lambda step, warmup: step / warmup),
}


def _warmup_name(scheduler: str, name: object) -> str:
    if not isinstance(name, str) or name not in WARMUPS:
        known = ", ".join(f"{key!r} ({formula})" for key, (formula, _) in WARMUPS.items())
        raise ValueError(f"{scheduler}: warmup must be one of {known}, got {name!r}")
    return name


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
    """Linear ramp from ``start_factor * lr`` to ``lr`` over ``warmup_steps``, then constant;
    ``warmup`` names where the ramp starts (the module's docstring; ``"huggingface"`` is
    transformers' ``get_constant_schedule_with_warmup``)."""

    def __init__(self, lr: float, warmup_steps: int, start_factor: float = 0.0, warmup: str = "linear") -> None:
        super().__init__()
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.lr = _positive("lr", lr)
        self.warmup_steps = warmup_steps
        self.start_factor = start_factor
        self.warmup = _warmup_name("LinearWarmupLR", warmup)

    def lr_at(self, step: int) -> float:
        if step >= self.warmup_steps:
            return self.lr
        fraction = WARMUPS[self.warmup][1](step, self.warmup_steps)
        return self.lr * (self.start_factor + (1.0 - self.start_factor) * fraction)


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from ``lr`` to ``min_lr`` over ``total_steps``, after an optional linear warmup
    whose start ``warmup`` names (the module's docstring): ``warmup="huggingface"`` gives transformers'
    ``get_cosine_schedule_with_warmup(opt, warmup_steps, total_steps)`` step for step,
    ``warmup="nanogpt"`` nanoGPT's ``get_lr`` with ``lr_decay_iters=total_steps``."""

    def __init__(self, lr: float, total_steps: int, min_lr: float = 0.0, warmup_steps: int = 0,
                 warmup: str = "linear") -> None:
        super().__init__()
        if total_steps <= 0 or warmup_steps < 0 or warmup_steps >= total_steps + 1:
            raise ValueError(f"need total_steps > 0 and 0 <= warmup_steps <= total_steps, got "
                             f"total_steps={total_steps}, warmup_steps={warmup_steps}")
        self.lr = _positive("lr", lr)
        self.total_steps = total_steps
        self.min_lr = min_lr
        self.warmup_steps = warmup_steps
        self.warmup = _warmup_name("CosineAnnealingLR", warmup)

    def lr_at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * WARMUPS[self.warmup][1](step, self.warmup_steps)
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


def _rate(scheduler: str, name: str, value: object) -> float:
    """A base rate; an optimizer in its place (PyTorch's first argument) is refused, naming the fix."""
    if isinstance(value, Optimizer):
        raise TypeError(f"{scheduler}: takes the rate, not the optimizer: schedulers here hand their rate to "
                        f"opt.step(..., lr=...); write {scheduler}({name}=opt.lr, ...) "
                        f"(the Learner steps it once per optimizer step)")
    return check_positive(f"{scheduler}: {name}", value)


def _steps(scheduler: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{scheduler}: {name} must be a positive int, got {value!r}")
    return value


class LambdaLR(LRScheduler):
    """``lr * lr_lambda(step)``, as PyTorch's LambdaLR (one function: the optimizer scales every
    group by the rate, so a group's own lambda is not offered). The function is not saved with the
    state: a resume rebuilds the scheduler with it and restores the step count."""

    def __init__(self, lr: float, lr_lambda: Callable[[int], float]) -> None:
        super().__init__()
        self.lr = _rate("LambdaLR", "lr", lr)
        if not callable(lr_lambda):
            raise TypeError(f"LambdaLR: lr_lambda must be a function of the step, got {type(lr_lambda).__name__}")
        self.lr_lambda = lr_lambda

    def lr_at(self, step: int) -> float:
        return self.lr * float(self.lr_lambda(step))


class OneCycleLR(LRScheduler):
    """Smith's one-cycle policy, PyTorch's OneCycleLR: from ``max_lr / div_factor`` up to
    ``max_lr`` over the first ``pct_start`` of ``total_steps``, then down to ``initial /
    final_div_factor`` (``three_phase``: back to the initial rate first, then down), annealed by
    cosine or linearly. ``total_steps`` or ``epochs`` x ``steps_per_epoch`` (optimizer steps, one
    per window). As in PyTorch, a step past ``total_steps`` is an error. Momentum is not cycled
    (PyTorch's ``cycle_momentum=False``): the scheduler gives the rate only."""

    def __init__(self, max_lr: float, total_steps: int | None = None, *, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 div_factor: float = 25.0, final_div_factor: float = 1e4, three_phase: bool = False,
                 cycle_momentum: bool = False) -> None:
        super().__init__()
        self.max_lr = _rate("OneCycleLR", "max_lr", max_lr)
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = _steps("OneCycleLR", "epochs", epochs) * _steps("OneCycleLR", "steps_per_epoch",
                                                                          steps_per_epoch)
        self.total_steps = _steps("OneCycleLR", "total_steps", total_steps)
        if isinstance(pct_start, bool) or not isinstance(pct_start, int | float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a number in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        if cycle_momentum:
            raise ValueError("OneCycleLR: cycle_momentum=True is not offered: the scheduler gives the optimizer "
                             "its rate only; the momentum (or Adam's beta1) stays as the optimizer was made")
        self.anneal_strategy = anneal_strategy
        self.initial_lr = self.max_lr / check_positive("OneCycleLR: div_factor", div_factor)
        self.min_lr = self.initial_lr / check_positive("OneCycleLR: final_div_factor", final_div_factor)
        rise = float(pct_start * self.total_steps) - 1
        last = self.total_steps - 1
        # (last step of the phase, rate at its start, rate at its end), as PyTorch lays them out
        self.phases = ([(rise, self.initial_lr, self.max_lr), (2 * rise, self.max_lr, self.initial_lr),
                        (last, self.initial_lr, self.min_lr)] if three_phase
                       else [(rise, self.initial_lr, self.max_lr), (last, self.max_lr, self.min_lr)])

    def _anneal(self, start: float, end: float, fraction: float) -> float:
        if self.anneal_strategy == "linear":
            return (end - start) * fraction + start
        return end + (start - end) / 2.0 * (math.cos(math.pi * fraction) + 1)

    def lr_at(self, step: int) -> float:
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: optimizer step {step + 1} is past the cycle's total_steps="
                             f"{self.total_steps}; make total_steps cover the run (epochs x windows per epoch)")
        begin = 0.0
        for i, (end, start_lr, end_lr) in enumerate(self.phases):
            if step <= end or i == len(self.phases) - 1:
                return self._anneal(start_lr, end_lr, (step - begin) / (end - begin))
            begin = end
        raise AssertionError("unreachable: the last phase always answers")


class SequentialLR(LRScheduler):
    """One scheduler after another, PyTorch's SequentialLR: ``schedulers[i]`` gives the rates
    from optimizer step ``milestones[i - 1]`` on, counting its own steps from 0 there. Each keeps
    its own base rate (give them all ``opt.lr`` for PyTorch's behaviour, where they share the
    optimizer's)."""

    def __init__(self, schedulers: Sequence[LRScheduler], milestones: Sequence[int]) -> None:
        super().__init__()
        if isinstance(schedulers, Optimizer):
            raise TypeError("SequentialLR: takes (schedulers, milestones), not the optimizer: the schedulers "
                            "carry their rates")
        schedulers = list(schedulers)
        milestones = list(milestones)
        if not schedulers:
            raise ValueError("SequentialLR: needs at least one scheduler")
        for i, scheduler in enumerate(schedulers):
            if not isinstance(scheduler, LRScheduler):
                raise TypeError(f"SequentialLR: item {i} is a {type(scheduler).__name__}, not an LRScheduler")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} milestone(s), "
                             f"got {len(milestones)}")
        for i, milestone in enumerate(milestones):
            _steps("SequentialLR", f"milestone {i}", milestone)
            if i and milestone <= milestones[i - 1]:
                raise ValueError(f"SequentialLR: milestones must increase, got {milestones}")
        self.schedulers = schedulers
        self.milestones = milestones

    def lr_at(self, step: int) -> float:
        index = bisect_right(self.milestones, step)
        start = self.milestones[index - 1] if index else 0
        return self.schedulers[index].lr_at(step - start)

"""Choosing the micro-batch size (and so k) that fits a memory budget, by measuring.

Two trial micro-batches (of 1 and of a few items) are run through forward and
backward under the allocator's peak counter. Activation memory grows linearly with
the micro-batch, so the two measurements give a fixed part and a per-item part;
the largest micro-batch whose peak, on top of the persistent state (parameters,
gradient arena, optimizer state), stays within the budget is chosen, as a divisor
of the effective batch so that every window holds exactly the effective batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minitorch_accum.data import DataLoader
from minitorch_accum.observe import PeakMemory
from minitorch_accum.train.run_parts import RunParts

__all__ = ["MemoryBudgetError", "MemoryPlan", "plan_learner_micro_batch", "plan_micro_batch"]


class MemoryBudgetError(ValueError):
    """The budget cannot hold even one item."""


@dataclass(frozen=True)
class MemoryPlan:
    micro_batch: int
    steps: int
    persistent_bytes: int
    fixed_activation_bytes: float
    per_item_bytes: float
    predicted_peak_bytes: int


def plan_micro_batch(budget: int, effective_batch: int, persistent_bytes: int,
                     measure: Callable[[int], int], probe_items: int = 8) -> MemoryPlan:
    """Pick the micro-batch for ``budget`` bytes; ``measure(b)`` returns the activation
    peak in bytes of one micro-batch of ``b`` items."""
    if budget <= 0:
        raise MemoryBudgetError(f"memory budget must be positive, got {budget}")
    small = measure(1)
    large_items = max(2, min(probe_items, effective_batch))
    large = measure(large_items)
    per_item = max((large - small) / (large_items - 1), 1.0)
    fixed = max(small - per_item, 0.0)
    if persistent_bytes + small > budget:
        raise MemoryBudgetError(
            f"memory budget of {budget:,} bytes is too small for one item: parameters, gradient arena and "
            f"optimizer state need {persistent_bytes:,} bytes and a micro-batch of 1 item peaks at {small:,} more"
        )
    fits = math.floor((budget - persistent_bytes - fixed) / per_item)
    fits = max(1, min(fits, effective_batch))
    micro = max(d for d in range(1, fits + 1) if effective_batch % d == 0)
    return MemoryPlan(micro, effective_batch // micro, persistent_bytes, fixed, per_item,
                      int(persistent_bytes + fixed + per_item * micro))


def plan_learner_micro_batch(run: RunParts, loader: DataLoader) -> tuple[DataLoader, MemoryPlan]:
    """The loader of the micro-batch that fits the run's ``memory_budget`` (its k set in the run's
    configuration to keep the effective batch), measured on two trial micro-batches of its own model
    and arena; and the plan."""
    config = run.config
    if loader.batch_size is None:
        raise MemoryBudgetError(f"memory_budget chooses how many items a micro-batch holds; the micro-batches of "
                                f"{loader!r} are cut by its token budget: choose max_tokens to fit the memory instead")
    effective = config.effective_batch or loader.batch_size * config.grads_accumulation
    dataset = loader.dataset
    # the trial micro-batches write into the learner's own arena: the window is empty
    # before training, and zero() makes the next write copy over them
    acc = run.accumulator

    def measure(items: int) -> int:
        batch = dataset.get_batch(np.arange(min(items, len(dataset))))
        with PeakMemory(acc.device()) as peak:
            out = run.step_model.train_step(batch)
            acc.backward(out.loss, out.num_items)
        acc.zero()
        return peak.peak_bytes

    params = run.step_model.parameters()
    param_bytes = sum(int(p.data.nbytes) for p in params)
    # the optimizer's state is float32 (master copies of 16-bit parameters are too)
    state_bytes = run.optimizer.state_slots() * sum(p.size * 4 for p in params)
    # one micro-batch first, not measured: a first call makes objects once (caches, the
    # arena's first write), which would read as activations and make the plan depend on it
    measure(1)
    plan = plan_micro_batch(config.memory_budget, effective, param_bytes + acc.store.nbytes + state_bytes, measure)
    config.grads_accumulation = plan.steps
    config.effective_batch = None
    return loader.with_batch_size(plan.micro_batch), plan

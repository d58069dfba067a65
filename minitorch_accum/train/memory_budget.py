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

__all__ = ["MemoryBudgetError", "MemoryPlan", "plan_micro_batch"]


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

"""What ``Learner.fit`` returns beside the model: every metrics line of the run, by kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minitorch_accum.train.memory_budget import MemoryPlan

__all__ = ["History"]


@dataclass
class History:
    """Every metrics line of the run, split by kind."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    valid: list[dict[str, Any]] = field(default_factory=list)
    memory_plan: MemoryPlan | None = None
    #: the data-parallel rank that kept this history (every rank sees the global figures; rank 0 logs them)
    rank: int = 0

    @property
    def final_loss(self) -> float | None:
        return self.steps[-1]["loss"] if self.steps else None

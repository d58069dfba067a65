"""Dynamic loss scaling for 16-bit gradients, as PyTorch's GradScaler.

The loss is multiplied by ``scale`` before backward (the accumulator seeds backward
with ``scale`` instead of 1, so no op is added) and the unscale 1/scale is folded
into the accumulation kernels' scale. A window with any non-finite gradient is
skipped: the optimizer does not step, and the scale is multiplied by
``backoff_factor``; after ``growth_interval`` clean windows it grows by
``growth_factor``. Powers of two keep scaling and unscaling exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DynamicLossScaler", "ScaleEvent"]


@dataclass(frozen=True)
class ScaleEvent:
    """A window that was skipped because of a non-finite gradient."""

    window: int
    old_scale: float
    new_scale: float


@dataclass
class DynamicLossScaler:
    init_scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: float = 1.0
    scale: float = field(init=False)
    clean_windows: int = field(init=False, default=0)
    events: list[ScaleEvent] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        if not self.init_scale > 0 or not self.growth_factor > 1.0 or not 0.0 < self.backoff_factor < 1.0:
            raise ValueError("DynamicLossScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1")
        if self.growth_interval <= 0:
            raise ValueError(f"DynamicLossScaler: growth_interval must be positive, got {self.growth_interval}")
        self.scale = float(self.init_scale)

    def update(self, found_nonfinite: bool, window: int = -1) -> None:
        """Adjust the scale at the end of a window."""
        if found_nonfinite:
            old = self.scale
            self.scale = max(self.scale * self.backoff_factor, self.min_scale)
            self.clean_windows = 0
            self.events.append(ScaleEvent(window, old, self.scale))
            return
        self.clean_windows += 1
        if self.clean_windows >= self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_windows = 0

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "clean_windows": self.clean_windows}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale = float(state["scale"])
        self.clean_windows = int(state["clean_windows"])

"""Dropout layer: active in training mode only, masks drawn from a seeded generator."""

from __future__ import annotations

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn import functional as F
from minitorch_accum.nn.module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    def __init__(self, p: float = 0.5, *, rng: np.random.Generator | None = None) -> None:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p
        self.rng = rng

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training, self.rng)

    def extra_repr(self) -> str:
        return f"p={self.p}"

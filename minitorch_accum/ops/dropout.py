"""Inverted dropout; its mask drawn inside the op, from the seeded generator.

The draw is part of the forward so that a captured call replayed (autodiff/replay.py) draws
its masks from the same generator in the same order as an eager call: a mask drawn by the
caller and handed in would be an array the replay repeats.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.backend import default_generator
from minitorch_accum.ops.function import Context, Function

__all__ = ["Dropout", "draw_keep"]


def draw_keep(ctx: Context, shape: tuple[int, ...], p: float, rng: np.random.Generator | None) -> Any:
    """Which units dropout keeps: each with probability 1 - ``p``, drawn on the host from ``rng``
    (None: the library's generator as it is now) and moved to the op's device."""
    return ctx.backend.asarray((rng or default_generator()).random(shape) >= p)


class Dropout(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, p: float, rng: np.random.Generator | None) -> Any:
        # keep * scale is the same array in forward and backward: kept units pass scaled
        multiplier = draw_keep(ctx, x.shape, p, rng).astype(x.dtype) * (1.0 / (1.0 - p))
        ctx.save(multiplier)
        return x * multiplier

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (multiplier,) = ctx.saved
        return (grad * multiplier,)

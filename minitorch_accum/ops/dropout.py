"""Inverted dropout with a mask drawn by the caller (so the random stream stays seedable)."""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = ["Dropout"]


class Dropout(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, keep: Any, scale: float) -> Any:
        # keep * scale is the same array in forward and backward: kept units pass scaled
        multiplier = keep.astype(x.dtype) * scale
        ctx.save(multiplier)
        return x * multiplier

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (multiplier,) = ctx.saved
        return (grad * multiplier,)

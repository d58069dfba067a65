"""Reductions over axes: sum, mean, max, min and a numerically stable logsumexp."""

from __future__ import annotations

import math
from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = ["LogSumExp", "Max", "Mean", "Min", "Sum"]


def _expand_to_input(xp: Any, grad: Any, axes: tuple[int, ...], keepdims: bool, shape: tuple[int, ...]) -> Any:
    """Bring a reduced gradient back to the input's rank so it broadcasts over the reduced axes."""
    if not keepdims:
        grad = xp.expand_dims(grad, axes) if axes else grad
    return xp.broadcast_to(grad, shape)


class Sum(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        ctx.axes, ctx.keepdims, ctx.shape = axes, keepdims, x.shape
        return ctx.xp.sum(x, axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (_expand_to_input(ctx.xp, grad, ctx.axes, ctx.keepdims, ctx.shape),)


class Mean(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        ctx.axes, ctx.keepdims, ctx.shape = axes, keepdims, x.shape
        ctx.count = math.prod(x.shape[a] for a in axes)
        return ctx.xp.mean(x, axis=axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        scaled = grad / ctx.count
        return (_expand_to_input(ctx.xp, scaled, ctx.axes, ctx.keepdims, ctx.shape),)


class Max(Function):
    """Max over axes; tied maxima share the gradient equally (a symmetric subgradient)."""

    @staticmethod
    def _extreme(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
        return xp.max(x, axis=axes, keepdims=True)

    @classmethod
    def forward(cls, ctx: Context, x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        out = cls._extreme(ctx.xp, x, axes)
        ctx.save(x, out)
        ctx.axes, ctx.keepdims = axes, keepdims
        return out if keepdims else ctx.xp.squeeze(out, axis=axes)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        x, out = ctx.saved
        xp = ctx.xp
        is_max = (x == out).astype(grad.dtype)
        count = xp.sum(is_max, axis=ctx.axes, keepdims=True)
        g = grad if ctx.keepdims else xp.expand_dims(grad, ctx.axes)
        return (is_max * (g / count),)


class Min(Max):
    """Min over axes; tied minima share the gradient equally."""

    @staticmethod
    def _extreme(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
        return xp.min(x, axis=axes, keepdims=True)


class LogSumExp(Function):
    """log(sum(exp(x))) computed as m + log(sum(exp(x - m))) so it never overflows."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        xp = ctx.xp
        m = xp.max(x, axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, xp.zeros((), dtype=x.dtype))
        out = m + xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True))
        ctx.save(x, out)
        ctx.axes, ctx.keepdims = axes, keepdims
        return out if keepdims else xp.squeeze(out, axis=axes)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        x, out = ctx.saved
        xp = ctx.xp
        g = grad if ctx.keepdims else xp.expand_dims(grad, ctx.axes)
        return (g * xp.exp(x - out),)

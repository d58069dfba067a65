"""Softmax and log-softmax along one axis, stable for any input magnitude."""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = ["LogSoftmax", "Softmax", "stable_log_softmax"]


def stable_log_softmax(xp: Any, x: Any, axis: int) -> Any:
    """x - logsumexp(x): subtracting the max first keeps exp from overflowing."""
    m = xp.max(x, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros((), dtype=x.dtype))
    shifted = x - m
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


def _saved(ctx: Context, out: Any, axis: int) -> Any:
    # both backward rules read the forward's output along its axis, not its input
    ctx.save(out)
    ctx.axis = axis
    return out


class Softmax(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, axis: int) -> Any:
        return _saved(ctx, ctx.xp.exp(stable_log_softmax(ctx.xp, x, axis)), axis)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (out,) = ctx.saved
        dot = ctx.xp.sum(grad * out, axis=ctx.axis, keepdims=True)
        return (out * (grad - dot),)


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, axis: int) -> Any:
        return _saved(ctx, stable_log_softmax(ctx.xp, x, axis), axis)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (out,) = ctx.saved
        xp = ctx.xp
        return (grad - xp.exp(out) * xp.sum(grad, axis=ctx.axis, keepdims=True),)

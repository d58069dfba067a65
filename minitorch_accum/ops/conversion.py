"""Conversions: a tensor to another dtype, to another device, or into a fresh copy; the gradient
converted back."""

from __future__ import annotations

from typing import Any

from minitorch_accum.backend.base import Backend
from minitorch_accum.ops.function import Context, Function

__all__ = ["Cast", "Clone", "Transfer"]


class Cast(Function):
    """Change dtype; the gradient is cast back to the input's dtype."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, dtype: Any) -> Any:
        ctx.input_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad.astype(ctx.input_dtype),)


class Transfer(Function):
    """Copy to the ``target`` backend's device; the gradient is copied back to the input's
    (``ctx.backend``). The one op whose result lives on another backend than its input: the
    autodiff layer's ``transfer`` runs it."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, target: Backend) -> Any:
        return target.asarray(x)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (ctx.backend.asarray(grad),)


class Clone(Function):
    """A copy with its own memory (PyTorch's ``clone``); the gradient passes through unchanged."""

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        return x.copy()

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad,)

"""Multi-head attention over a qkv Linear's output, as one op.

A transformer block splits its (..., T, 3C) qkv product into q, k and v, cuts each into heads
((..., H, T, C/H): a reshape and a transpose), attends, and merges the heads back into
(..., T, C): eleven data-movement ops around the attention in the forward, each one a graph
step. Their backward is worse than their forward: each head transpose's gradient is copied by
the reshape's, each of the split's three slices makes a zero (..., T, 3C) array and writes its
third into it, and the engine adds the three. ``PackedQKVAttention`` is the same computation
in one step: q, k and v are views of qkv (no copy), the attention is
``ScaledDotProductAttention``'s (the same calls on the same arrays: the same bits), the
heads are merged by one copy, and the backward writes the three gradients into thirds of one
(..., T, 3C) array. The gradient it returns equals the composed ops' (one thing differs: a
gradient element of -0 stays -0, where the composed sum of zeros made it +0; every GEMM and
sum after it starts from +0, so no gradient of a parameter or input differs).
"""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.attention import ScaledDotProductAttention, attention_backward
from minitorch_accum.ops.function import Context, Function

__all__ = ["PackedQKVAttention", "split_heads"]


def split_heads(xp: Any, qkv: Any, n_head: int) -> tuple[Any, Any, Any]:
    """q, k, v of shape (..., H, T, C/H), views of ``qkv`` (..., T, 3C): head h of q is columns
    [h C/H, (h + 1) C/H) of the first third, as ``qkv.split(C)`` then ``view(..., T, H, C/H)``
    and ``transpose`` make it."""
    *lead, length, width = qkv.shape
    parts = qkv.reshape(*lead, length, 3, n_head, width // (3 * n_head))
    return tuple(xp.swapaxes(parts[..., i, :, :], -3, -2) for i in range(3))  # type: ignore[return-value]


class PackedQKVAttention(Function):
    """qkv (..., T, 3C) -> the attention of its n_head heads, merged: (..., T, C). Parameters as
    ``ScaledDotProductAttention``'s (scale, bias, dropout_p, rng)."""

    @staticmethod
    def forward(ctx: Context, qkv: Any, *, n_head: int, scale: float, bias: Any, dropout_p: float = 0.0,
                rng: Any = None) -> Any:
        xp = ctx.xp
        q, k, v = split_heads(xp, qkv, n_head)
        heads = ScaledDotProductAttention.forward(ctx, q, k, v, scale=scale, bias=bias, dropout_p=dropout_p, rng=rng)
        ctx.qkv_shape = qkv.shape
        *lead, length, width = qkv.shape
        return xp.ascontiguousarray(xp.swapaxes(heads, -3, -2)).reshape(*lead, length, width // 3)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        xp = ctx.xp
        *lead, length, width = ctx.qkv_shape
        n_head = ctx.saved[0].shape[-3]
        heads = xp.swapaxes(grad.reshape(*lead, length, n_head, width // (3 * n_head)), -3, -2)
        grads = attention_backward(ctx, heads, True, True, True)
        out = xp.empty(ctx.qkv_shape, dtype=grad.dtype)
        for part, g in zip(split_heads(xp, out, n_head), grads, strict=True):
            part[...] = g  # each third of every row written once: no zeros, no sums
        return (out,)

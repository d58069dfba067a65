"""Scaled dot-product attention as one op: softmax(q k^T scale + bias) v, forward beside backward.

Composed of matmul, add, softmax and matmul ops, the graph would keep the scores,
the masked scores and the probabilities of every head alive until backward. Fused,
it keeps only the probabilities (and the inputs, which live anyway): the softmax's
backward needs nothing else. For float32 and float64 the softmax, with its scale and a
mask of one (L, S) block, is one fused row kernel each way (kernels.softmax_forward,
softmax_backward), in the scores' dtype; other dtypes, other masks and dropout take the
array-library form.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.ops.dropout import draw_keep
from minitorch_accum.ops.function import Context, Function
from minitorch_accum.ops.matmul import swap_last
from minitorch_accum.ops.softmax import stable_log_softmax

__all__ = ["ScaledDotProductAttention", "attention_backward"]


class ScaledDotProductAttention(Function):
    """q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev).

    ``bias`` (broadcast to (..., L, S), -inf where a query may not look) is added to
    the scaled scores; ``dropout_p`` > 0 drops attention probabilities (a mask of the scores'
    shape drawn here from ``rng``, the kept ones scaled by 1/(1-p)), as PyTorch's math path does.
    """

    @staticmethod
    def forward(ctx: Context, q: Any, k: Any, v: Any, *, scale: float, bias: Any, dropout_p: float = 0.0,
                rng: Any = None) -> Any:
        xp = ctx.xp
        keep = None
        if dropout_p > 0.0:
            shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (q.shape[-2], k.shape[-2])
            keep = draw_keep(ctx, shape, dropout_p, rng)
        keep_scale = 1.0 / (1.0 - dropout_p)
        scores = ctx.backend.batched_matmul(q, swap_last(xp, k))
        length, source = scores.shape[-2:]
        ctx.fused = keep is None and ctx.backend.fuses(scores.dtype) and scores.size > 0 and (
            bias is None or (bias.dtype == scores.dtype and bias.shape[-2:] == (length, source)
                             and bias.size == length * source))
        if ctx.fused:  # one row kernel: scale, the mask's (L, S) block, max, exp, sum, normalize
            rows = bias.reshape(length, source) if bias is not None else None
            probs = ctx.backend.softmax(scores.reshape(-1, source), rows, scale).reshape(scores.shape)
        else:
            scores = scores * q.dtype.type(scale)
            if bias is not None:
                scores = scores + bias
            probs = xp.exp(stable_log_softmax(xp, scores, -1))
        del scores
        ctx.save(q, k, v, probs)
        ctx.scale, ctx.keep, ctx.keep_scale = scale, keep, keep_scale
        return ctx.backend.batched_matmul(_dropped(ctx, probs), v)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any, Any]:
        return attention_backward(ctx, grad, *ctx.needs_input_grad)


def attention_backward(ctx: Context, grad: Any, need_q: bool, need_k: bool, need_v: bool) -> tuple[Any, Any, Any]:
    """The gradients of q, k and v that are needed (None for the others), from what
    ``ScaledDotProductAttention.forward`` left in ``ctx``."""
    q, k, v, probs = ctx.saved
    xp = ctx.xp
    scale = grad.dtype.type(ctx.scale)
    grad_v = ctx.backend.batched_matmul(swap_last(xp, _dropped(ctx, probs)), grad) if need_v else None
    if not (need_q or need_k):
        return None, None, grad_v
    grad_probs = _dropped(ctx, ctx.backend.batched_matmul(grad, swap_last(xp, v)))
    # softmax backward: p * (g - sum(g p)) over the keys, times the scale
    if ctx.fused:
        source = probs.shape[-1]
        grad_scores = ctx.backend.softmax_backward(probs.reshape(-1, source), grad_probs.reshape(-1, source),
                                                   ctx.scale).reshape(probs.shape)
    else:
        grad_scores = probs * (grad_probs - xp.sum(grad_probs * probs, axis=-1, keepdims=True))
        grad_scores *= scale
    grad_q = ctx.backend.batched_matmul(grad_scores, k) if need_q else None
    grad_k = ctx.backend.batched_matmul(swap_last(xp, grad_scores), q) if need_k else None
    return grad_q, grad_k, grad_v


def _dropped(ctx: Context, m: Any) -> Any:
    """``m`` with dropout's mask and scale applied (``m`` itself without dropout)."""
    if ctx.keep is None:
        return m
    return m * ctx.keep * m.dtype.type(ctx.keep_scale)

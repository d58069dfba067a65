"""Layer normalization and batch normalization, forward and fused backward.

Batch norm is here for study: its output for one item depends on the other items
of the micro-batch, which is exactly why gradient accumulation cannot reproduce the
big-batch gradient of a model that uses it.
"""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = ["BatchNorm", "LayerNorm"]


class LayerNorm(Function):
    """Normalize over the last axis, then scale by ``weight`` and shift by ``bias``."""

    @staticmethod
    def forward(ctx: Context, x: Any, weight: Any, bias: Any, *, eps: float) -> Any:
        xp = ctx.xp
        if ctx.backend.fuses(x.dtype) and x.ndim:
            # one fused pass: x (as rows), and mean and rstd per row are what backward reads
            rows = xp.ascontiguousarray(x.reshape(-1, x.shape[-1]))
            y, mean, rstd = ctx.backend.layer_norm(rows, weight, bias, eps)
            ctx.save(rows, weight, mean, rstd)
            return y.reshape(x.shape)
        mean = xp.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = xp.mean(centered * centered, axis=-1, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + eps)
        x_hat = centered * rstd
        ctx.save(x_hat, rstd, weight)
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any, Any]:
        if len(ctx.saved) == 4:
            rows, weight, mean, rstd = ctx.saved
            grad_x, grad_w, grad_b = ctx.backend.layer_norm_backward(
                rows, weight, mean, rstd, grad.reshape(rows.shape), ctx.needs_input_grad)
            return (None if grad_x is None else grad_x.reshape(grad.shape)), grad_w, grad_b
        x_hat, rstd, weight = ctx.saved
        xp = ctx.xp
        leading = tuple(range(grad.ndim - 1))
        grad_x = None
        if ctx.needs_input_grad[0]:
            g_hat = grad * weight
            grad_x = rstd * (
                g_hat
                - xp.mean(g_hat, axis=-1, keepdims=True)
                - x_hat * xp.mean(g_hat * x_hat, axis=-1, keepdims=True)
            )
        grad_w = xp.sum(grad * x_hat, axis=leading) if ctx.needs_input_grad[1] else None
        grad_b = xp.sum(grad, axis=leading) if ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def _channel_view(xp: Any, v: Any, ndim: int) -> Any:
    """A per-channel vector shaped to broadcast over (N, C) or (N, C, L)."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


class BatchNorm(Function):
    """Batch normalization over every axis but the channel axis 1.

    In training, batch statistics are used and ``running_mean``/``running_var``
    (arrays owned by the layer) are updated in place, the variance unbiased as in
    PyTorch; in evaluation the running statistics are used.
    """

    @staticmethod
    def forward(
        ctx: Context,
        x: Any,
        weight: Any,
        bias: Any,
        *,
        running_mean: Any,
        running_var: Any,
        training: bool,
        momentum: float,
        eps: float,
    ) -> Any:
        xp = ctx.xp
        axes = (0,) + tuple(range(2, x.ndim))
        count = x.size // x.shape[1]
        if training:
            mean = xp.mean(x, axis=axes)
            centered = x - _channel_view(xp, mean, x.ndim)
            var = xp.mean(centered * centered, axis=axes)
            if running_mean is not None:
                unbiased = var * (count / max(count - 1, 1))
                running_mean *= 1.0 - momentum
                running_mean += momentum * mean.astype(running_mean.dtype)
                running_var *= 1.0 - momentum
                running_var += momentum * unbiased.astype(running_var.dtype)
        else:
            mean, var = running_mean.astype(x.dtype), running_var.astype(x.dtype)
            centered = x - _channel_view(xp, mean, x.ndim)
        rstd = _channel_view(xp, 1.0 / xp.sqrt(var + eps), x.ndim)
        x_hat = centered * rstd
        ctx.save(x_hat, rstd, weight)
        ctx.axes, ctx.count, ctx.training = axes, count, training
        return x_hat * _channel_view(xp, weight, x.ndim) + _channel_view(xp, bias, x.ndim)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any, Any]:
        x_hat, rstd, weight = ctx.saved
        xp = ctx.xp
        axes = ctx.axes
        grad_x = None
        if ctx.needs_input_grad[0]:
            g_hat = grad * _channel_view(xp, weight, grad.ndim)
            if ctx.training:
                # batch statistics depend on every item: the two mean terms carry that coupling
                grad_x = rstd * (
                    g_hat
                    - xp.mean(g_hat, axis=axes, keepdims=True)
                    - x_hat * xp.mean(g_hat * x_hat, axis=axes, keepdims=True)
                )
            else:
                grad_x = g_hat * rstd
        grad_w = xp.sum(grad * x_hat, axis=axes) if ctx.needs_input_grad[1] else None
        grad_b = xp.sum(grad, axis=axes) if ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b

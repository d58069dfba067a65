"""Matrix product (2-D and batched), whose weight gradient can be fused into a GEMM.

``grad_factors`` exposes the weight gradient as a product ``A @ B`` of two 2-D
arrays instead of computing it, so the accumulation layer can let the GEMM itself
add it into a persistent buffer (beta = 1), as Megatron's
gradient_accumulation_fusion does.
"""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = ["MatMul"]


def _swap_last(xp: Any, m: Any) -> Any:
    return xp.swapaxes(m, -1, -2)


class MatMul(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save(a, b)
        return ctx.xp.matmul(a, b)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b = ctx.saved
        xp = ctx.xp
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            factors = _factors(xp, a, b, grad, 0)
            grad_a = factors[0] @ factors[1] if factors else xp.matmul(grad, _swap_last(xp, b))
        if ctx.needs_input_grad[1]:
            factors = _factors(xp, a, b, grad, 1)
            grad_b = factors[0] @ factors[1] if factors else xp.matmul(_swap_last(xp, a), grad)
        return grad_a, grad_b

    @staticmethod
    def grad_factors(ctx: Context, grad: Any, index: int) -> tuple[Any, Any] | None:
        """2-D ``(A, B)`` with ``A @ B`` = the gradient of input ``index``, or None if the
        gradient is not one plain GEMM (for instance a batched weight)."""
        a, b = ctx.saved
        return _factors(ctx.xp, a, b, grad, index)


def _factors(xp: Any, a: Any, b: Any, grad: Any, index: int) -> tuple[Any, Any] | None:
    if index == 1 and b.ndim == 2:
        # y = a @ W with a of shape (..., k): dW = a_flat^T @ g_flat, summing every batch item
        k, m = b.shape
        return a.reshape(-1, k).T, grad.reshape(-1, m)
    if index == 0 and a.ndim == 2 and b.ndim == 2:
        return grad, b.T
    return None

"""Matrix product: its shape rules, and the op (2-D and batched) whose weight gradient can be fused into a GEMM.

``matmul_shape`` is the one statement of the rules (NumPy's and PyTorch's: a 1-D operand is
a row on the left and a column on the right, and drops out of the result; the axes before
the last two broadcast); every matmul of tensors, ``@`` and ``F.linear`` included, checks
its operands with it. ``MatMul`` itself takes operands of 2 axes or more.

``grad_factors`` exposes the weight gradient as a product ``A @ B`` of two 2-D
arrays instead of computing it, so the accumulation layer can let the GEMM itself
add it into a persistent buffer (beta = 1), as Megatron's
gradient_accumulation_fusion does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minitorch_accum.ops.function import Context, Function, OpError

__all__ = ["MatMul", "matmul_shape", "swap_last"]


def matmul_shape(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of ``a @ b`` for operands of shapes ``a`` and ``b``; an OpError that names
    ``op`` and both shapes when they do not fit."""
    if not a or not b:
        raise OpError(f"{op}: operands must have at least 1 axis, got shapes {a} and {b}")
    left = (1, *a) if len(a) == 1 else a
    right = (*b, 1) if len(b) == 1 else b
    if left[-1] != right[-2]:
        raise OpError(
            f"{op}: shapes {a} and {b} are not aligned: "
            f"{left[-1]} (last axis of the first) != {right[-2]} (second-to-last of the second)"
        )
    batch_a, batch_b = left[:-2], right[:-2]
    if not batch_b or batch_a == batch_b:  # x @ W, or equal batches: no np.broadcast_shapes (~4 us)
        batch = batch_a
    elif not batch_a:
        batch = batch_b
    else:
        try:
            batch = np.broadcast_shapes(batch_a, batch_b)
        except ValueError:
            raise OpError(f"{op}: batch shapes of {a} and {b} cannot be broadcast") from None
    rows = left[-2:-1] if len(a) > 1 else ()  # a 1-D operand's axis drops out
    columns = right[-1:] if len(b) > 1 else ()
    return batch + rows + columns


def swap_last(xp: Any, m: Any) -> Any:
    """``m`` with its last two axes swapped (a batch of matrices transposed), as a view."""
    return xp.swapaxes(m, -1, -2)


def _stacked_times_matrix(ctx: Context, a: Any, b: Any) -> Any:
    """``a @ b`` for ``a`` of 3 axes or more and a 2-D ``b`` as one 2-D GEMM over every row of
    ``a`` (a reshape, no copy when ``a`` is contiguous): NumPy's matmul would run one GEMM per
    leading index (32 GEMMs of 32 rows for a batch of 32 sequences of 32)."""
    rows = math.prod(a.shape[:-1])  # not -1: a reshape cannot infer it when the last axis is empty
    return ctx.backend.matmul(a.reshape(rows, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])


class MatMul(Function):
    """``a @ b``; every product that is one 2-D GEMM goes through ``Backend.matmul`` (on the CPU,
    the native pool's GEMM), batched ones through ``Backend.batched_matmul`` (on the CPU, one
    BLAS call per matrix on the same pool when the batch axes agree; the array library's matmul
    otherwise)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save(a, b)
        if a.ndim > 2 and b.ndim == 2:
            return _stacked_times_matrix(ctx, a, b)
        if a.ndim == 2 and b.ndim == 2:
            return ctx.backend.matmul(a, b)
        return ctx.backend.batched_matmul(a, b)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b = ctx.saved
        xp = ctx.xp
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            factors = _factors(xp, a, b, grad, 0)
            if factors:
                grad_a = ctx.backend.matmul(*factors)
            elif grad.ndim > 2 and b.ndim == 2:
                grad_a = _stacked_times_matrix(ctx, grad, b.T)
            else:
                grad_a = ctx.backend.batched_matmul(grad, swap_last(xp, b))
        if ctx.needs_input_grad[1]:
            factors = _factors(xp, a, b, grad, 1)
            grad_b = ctx.backend.matmul(*factors) if factors else ctx.backend.batched_matmul(swap_last(xp, a), grad)
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
        rows = math.prod(a.shape[:-1])  # not reshape(-1, k): that cannot infer rows when k or m is 0
        return a.reshape(rows, k).T, grad.reshape(rows, m)
    if index == 0 and a.ndim == 2 and b.ndim == 2:
        return grad, b.T
    return None

"""A Linear layer's forward in one op: ``x @ W + b`` as one GEMM whose last step adds the bias.

``F.linear`` used to make two ops, a MatMul and an Add: the product written to memory, then read
and written again by the bias's pass (8 bytes an element; in nanoGPT's CPU configuration 2.1 ms
of a 53 ms micro-batch, and two graph steps a layer for the engine to walk). ``Linear`` computes
the same bits in one call (``Backend.linear``: on the CPU the native float32 GEMM adds the bias
row in its epilogue, rounded as the separate addition rounds it) and one graph step. Its
backward is MatMul's, the bias's gradient the incoming one, which the engine sums over the rows
as it summed the Add's (``reduce_to_shape``). The weight's gradient is still a GEMM the
accumulation layer may fuse into the arena (``grad_factors``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from minitorch_accum.ops.function import Context, Function, GradFactors
from minitorch_accum.ops.matmul import MatMul, _factors

__all__ = ["Linear"]


def _factors_of_product(ctx: Context, grad: Any, index: int) -> tuple[Any, Any] | None:
    if index > 1:
        return None
    x, w = ctx.saved
    return _factors(ctx.xp, x, w, grad, index)


class Linear(Function):
    """``x @ w + bias`` for ``x`` of 2 axes or more, a 2-D ``w`` of shape (in, out) and a bias of
    shape (out,), all of one dtype (``F.linear`` checks)."""

    @staticmethod
    def forward(ctx: Context, x: Any, w: Any, bias: Any) -> Any:
        ctx.save(x, w)
        return ctx.backend.linear(x, w, bias)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any, Any]:
        grad_x, grad_w = MatMul.backward(ctx, grad)  # reads needs_input_grad[0] and [1] only
        return grad_x, grad_w, grad if ctx.needs_input_grad[2] else None

    #: MatMul's factors for x and w; the bias's gradient is a sum of rows, not a product
    grad_factors: ClassVar[GradFactors | None] = _factors_of_product

"""Free functions over tensors (``mta.exp(x)``, ``mta.stack([...])``, ``mta.tril(x)``).

Each is the method of the same name (``mta.split(x, 2, dim=-1)`` is ``x.split(2, dim=-1)``),
spelled as PyTorch's ``torch.*`` functions so that code written for either reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.graph import apply
from minitorch_accum.autodiff.operands import as_operand, binary, check_binary
from minitorch_accum.autodiff.tensor import Tensor
from minitorch_accum.ops.axes import axis_argument, normalize_axis
from minitorch_accum.ops.function import OpError

__all__ = [
    "abs",
    "argmax",
    "argmin",
    "cat",
    "chunk",
    "clamp",
    "concatenate",
    "exp",
    "gelu",
    "log",
    "log_softmax",
    "logsumexp",
    "masked_fill",
    "maximum",
    "minimum",
    "relu",
    "rsqrt",
    "sigmoid",
    "softmax",
    "split",
    "sqrt",
    "square",
    "stack",
    "std",
    "tanh",
    "topk",
    "tril",
    "triu",
    "var",
    "where",
]


def exp(x: Tensor) -> Tensor:
    return x.exp()


def log(x: Tensor) -> Tensor:
    return x.log()


def sqrt(x: Tensor) -> Tensor:
    return x.sqrt()


def rsqrt(x: Tensor) -> Tensor:
    return x.rsqrt()


def square(x: Tensor) -> Tensor:
    return x.square()


def abs(x: Tensor) -> Tensor:
    return x.abs()


def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    return x.clamp(min, max)


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def relu(x: Tensor) -> Tensor:
    return x.relu()


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU: the exact erf form by default (PyTorch's), ``approximate="tanh"`` for GPT-2's."""
    return x.gelu(approximate)


def softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    return x.softmax(axis, dim=dim)


def log_softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    return x.log_softmax(axis, dim=dim)


def logsumexp(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
              dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Tensor:
    return x.logsumexp(axis, keepdims, dim=dim, keepdim=keepdim)


def var(x: Tensor, axis: int | Sequence[int] | None = None, unbiased: bool | None = None, keepdims: bool = False,
        *, correction: float | None = None, dim: int | Sequence[int] | None = None,
        keepdim: bool | None = None) -> Tensor:
    return x.var(axis, unbiased, keepdims, correction=correction, dim=dim, keepdim=keepdim)


def std(x: Tensor, axis: int | Sequence[int] | None = None, unbiased: bool | None = None, keepdims: bool = False,
        *, correction: float | None = None, dim: int | Sequence[int] | None = None,
        keepdim: bool | None = None) -> Tensor:
    return x.std(axis, unbiased, keepdims, correction=correction, dim=dim, keepdim=keepdim)


def topk(x: Tensor, k: int, axis: int | None = None, largest: bool = True, sorted: bool = True, *,
         dim: int | None = None) -> Any:
    return x.topk(k, axis, largest, sorted, dim=dim)


def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False, *, dim: int | None = None,
           keepdim: bool | None = None) -> Tensor:
    return x.argmax(axis, keepdims, dim=dim, keepdim=keepdim)


def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False, *, dim: int | None = None,
           keepdim: bool | None = None) -> Tensor:
    return x.argmin(axis, keepdims, dim=dim, keepdim=keepdim)


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    return x.masked_fill(mask, value)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes; ``mta.tril(mta.ones(T, T, dtype=mta.bool))`` is a causal mask."""
    return x.tril(diagonal)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    return x.triu(diagonal)


def split(x: Tensor, split_size_or_sections: int | Sequence[int], axis: int | None = None, *,
          dim: int | None = None) -> tuple[Tensor, ...]:
    return x.split(split_size_or_sections, axis, dim=dim)


def chunk(x: Tensor, chunks: int, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, ...]:
    return x.chunk(chunks, axis, dim=dim)


def maximum(a: Tensor, b: Any) -> Tensor:
    """Elementwise maximum (ties share the gradient)."""
    return binary(ops.Maximum, "maximum", a, b)


def minimum(a: Tensor, b: Any) -> Tensor:
    """Elementwise minimum (ties share the gradient)."""
    return binary(ops.Minimum, "minimum", a, b)


def _check_joinable(op: str, tensors: Sequence[Tensor]) -> None:
    if not tensors:
        raise OpError(f"{op}: needs at least one tensor")
    first = tensors[0]
    for t in tensors[1:]:
        if t.device != first.device:
            raise ValueError(f"{op}: tensors are on different devices: {first.device} and {t.device}")
        if t.dtype != first.dtype:
            raise TypeError(f"{op}: dtype mismatch: {first.dtype.name} and {t.dtype.name}")


def concatenate(tensors: Sequence[Tensor], axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Join tensors along an existing axis (default 0; PyTorch: ``dim``)."""
    tensors = list(tensors)
    _check_joinable("concatenate", tensors)
    ndim = tensors[0].ndim
    chosen = axis_argument("concatenate", axis, dim)
    axis = 0 if chosen is None else chosen
    ax = normalize_axis(axis, ndim, "concatenate", tensors[0].shape)
    for t in tensors[1:]:
        if t.ndim != ndim or any(t.shape[i] != tensors[0].shape[i] for i in range(ndim) if i != ax):
            raise OpError(
                f"concatenate: shapes {tensors[0].shape} and {t.shape} differ outside axis {axis}"
            )
    return apply(ops.Concatenate, *tensors, axis=ax)


cat = concatenate


def stack(tensors: Sequence[Tensor], axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Join same-shaped tensors along a new axis (default 0; PyTorch: ``dim``)."""
    axis = axis_argument("stack", axis, dim)
    axis = 0 if axis is None else axis
    tensors = list(tensors)
    _check_joinable("stack", tensors)
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise OpError(f"stack: all tensors need the same shape, got {tensors[0].shape} and {t.shape}")
    ax = normalize_axis(axis, tensors[0].ndim + 1, "stack", tensors[0].shape)
    return apply(ops.Stack, *tensors, axis=ax)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """``a`` where ``condition`` holds, else ``b``; the condition takes no gradient."""
    like = a if isinstance(a, Tensor) else b
    if not isinstance(like, Tensor):
        raise TypeError("where: at least one of a and b must be a Tensor")
    a = as_operand(a, like, "where")
    b = as_operand(b, like, "where")
    check_binary("where", a, b)
    cond = condition.data if isinstance(condition, Tensor) else like.backend.asarray(condition)
    if cond.dtype != np.bool_:
        raise TypeError(f"where: condition must be bool, got {cond.dtype.name}")
    try:
        shape = np.broadcast_shapes(tuple(cond.shape), a.shape, b.shape)
    except ValueError:
        raise OpError(
            f"where: shapes {tuple(cond.shape)} (condition), {a.shape} and {b.shape} cannot be broadcast"
        ) from None
    if a.shape != shape:
        a = a.broadcast_to(shape)
    return apply(ops.Where, a, b, condition=cond)

"""Free functions over tensors (``mta.exp(x)``, ``mta.stack([...])``, ``mta.zeros(...)``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.tensor import Tensor, _as_operand, _check_binary, apply, matmul, tensor
from minitorch_accum.backend import DeviceLike, backend_for, default_generator, resolve_dtype
from minitorch_accum.ops.axes import normalize_axis
from minitorch_accum.ops.function import OpError

__all__ = [
    "cat",
    "concatenate",
    "exp",
    "gelu",
    "log",
    "log_softmax",
    "logsumexp",
    "matmul",
    "maximum",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "relu",
    "sigmoid",
    "softmax",
    "sqrt",
    "stack",
    "tanh",
    "where",
    "zeros",
    "zeros_like",
]


def exp(x: Tensor) -> Tensor:
    return x.exp()


def log(x: Tensor) -> Tensor:
    return x.log()


def sqrt(x: Tensor) -> Tensor:
    return x.sqrt()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def relu(x: Tensor) -> Tensor:
    return x.relu()


def gelu(x: Tensor) -> Tensor:
    """GELU in its tanh form (as GPT-2 and Burn's default)."""
    return x.gelu()


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return x.softmax(axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    return x.log_softmax(axis)


def logsumexp(x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
    return x.logsumexp(axis, keepdims)


def maximum(a: Tensor, b: Any) -> Tensor:
    """Elementwise maximum (ties share the gradient)."""
    b = _as_operand(b, a, "maximum")
    _check_binary("maximum", a, b)
    return apply(ops.Maximum, a, b)


def _check_joinable(op: str, tensors: Sequence[Tensor]) -> None:
    if not tensors:
        raise OpError(f"{op}: needs at least one tensor")
    first = tensors[0]
    for t in tensors[1:]:
        if t.device != first.device:
            raise ValueError(f"{op}: tensors are on different devices: {first.device} and {t.device}")
        if t.dtype != first.dtype:
            raise TypeError(f"{op}: dtype mismatch: {first.dtype.name} and {t.dtype.name}")


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis."""
    tensors = list(tensors)
    _check_joinable("concatenate", tensors)
    ndim = tensors[0].ndim
    ax = normalize_axis(axis, ndim, "concatenate", tensors[0].shape)
    for t in tensors[1:]:
        if t.ndim != ndim or any(t.shape[i] != tensors[0].shape[i] for i in range(ndim) if i != ax):
            raise OpError(
                f"concatenate: shapes {tensors[0].shape} and {t.shape} differ outside axis {axis}"
            )
    return apply(ops.Concatenate, *tensors, axis=ax)


cat = concatenate


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join same-shaped tensors along a new axis."""
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
    a = _as_operand(a, like, "where")
    b = _as_operand(b, like, "where")
    _check_binary("where", a, b)
    cond = condition.data if isinstance(condition, Tensor) else like._backend.asarray(condition)
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


def zeros(*shape: int | Sequence[int], dtype: Any = "float32", device: DeviceLike | None = "cpu",
          requires_grad: bool = False) -> Tensor:
    size = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
    backend = backend_for(device)
    return Tensor(backend.xp.zeros(size, dtype=resolve_dtype(dtype)), requires_grad, _backend=backend)


def ones(*shape: int | Sequence[int], dtype: Any = "float32", device: DeviceLike | None = "cpu",
         requires_grad: bool = False) -> Tensor:
    size = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
    backend = backend_for(device)
    return Tensor(backend.xp.ones(size, dtype=resolve_dtype(dtype)), requires_grad, _backend=backend)


def zeros_like(x: Tensor, requires_grad: bool = False) -> Tensor:
    return zeros(x.shape, dtype=x.dtype, device=x.device, requires_grad=requires_grad)


def ones_like(x: Tensor, requires_grad: bool = False) -> Tensor:
    return ones(x.shape, dtype=x.dtype, device=x.device, requires_grad=requires_grad)


def randn(*shape: int | Sequence[int], dtype: Any = "float32", device: DeviceLike | None = "cpu",
          requires_grad: bool = False, rng: np.random.Generator | None = None) -> Tensor:
    """Standard normal samples from the seeded default generator (or ``rng``)."""
    size = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
    values = (rng or default_generator()).standard_normal(size)
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def rand(*shape: int | Sequence[int], dtype: Any = "float32", device: DeviceLike | None = "cpu",
         requires_grad: bool = False, rng: np.random.Generator | None = None) -> Tensor:
    """Uniform samples in [0, 1) from the seeded default generator (or ``rng``)."""
    size = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
    values = (rng or default_generator()).random(size)
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)



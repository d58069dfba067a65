"""How the operands of a binary op meet: a number, list or array beside a tensor becomes a
constant of its dtype on its device; both must then agree on dtype and broadcast together.

Tensor's operators, the free functions (``mta.maximum``, ``mta.where``) and the losses share
these, so every binary op refuses the same things with the same words.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.autodiff.graph import TensorBase, apply
from minitorch_accum.ops.function import Function, OpError

__all__ = ["as_operand", "binary", "broadcastable", "check_binary", "check_logical", "compare", "logical"]


def as_operand(value: Any, like: TensorBase, op: str) -> Any:
    """A tensor for ``value``: tensors are checked, numbers and arrays become constants."""
    if isinstance(value, TensorBase):
        if value.backend is not like.backend and value.backend.device != like.backend.device:
            raise ValueError(
                f"{op}: tensors are on different devices: {like.backend.device} and {value.backend.device}; "
                "move one with .to(device)"
            )
        return value
    backend = like.backend
    if isinstance(value, bool | int | float | np.number):
        return like.wrap(backend.xp.asarray(value, dtype=like.dtype))
    if isinstance(value, list | tuple | np.ndarray) or backend.is_array(value):
        return like.wrap(backend.asarray(value, dtype=like.dtype))
    raise TypeError(f"{op}: cannot combine a Tensor with {type(value).__name__}")


def check_binary(op: str, a: TensorBase, b: TensorBase) -> None:
    """The same dtype, and shapes that broadcast together; the error names ``op``."""
    if a.data.dtype != b.data.dtype:
        raise TypeError(
            f"{op}: dtype mismatch: {a.dtype.name} and {b.dtype.name}; cast one with .to(dtype=...)"
        )
    if not broadcastable(a.data.shape, b.data.shape):
        raise OpError(f"{op}: shapes {a.shape} and {b.shape} cannot be broadcast together")


def broadcastable(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether shapes ``a`` and ``b`` broadcast together (NumPy's rule: trailing axes equal or 1).
    Every binary op asks; ``np.broadcast_shapes`` takes ~4 us to answer, this a tenth of it."""
    if a == b:
        return True
    # zip stops at the shorter shape: the longer one's leading axes broadcast against nothing
    return all(x == y or x == 1 or y == 1 for x, y in zip(reversed(a), reversed(b)))  # noqa: B905


def binary(fn: type[Function], op: str, a: Any, b: Any) -> Any:
    """``fn`` applied to two operands, at least one of them a tensor."""
    like = a if isinstance(a, TensorBase) else b
    a = as_operand(a, like, op)
    b = as_operand(b, like, op)
    check_binary(op, a, b)
    return apply(fn, a, b)


def compare(a: TensorBase, other: Any, name: str) -> Any:
    """The bool tensor of ``xp.<name>(a, other)`` (``less``, ``equal``, ...); no gradient."""
    b = as_operand(other, a, name)
    check_binary(name, a, b)
    return a.wrap(getattr(a.backend.xp, name)(a.data, b.data))


def logical(a: TensorBase, other: Any, name: str, symbol: str) -> Any:
    """``xp.<name>(a, other)`` for bool (or integer) tensors: ``&``, ``|``, ``^``."""
    b = as_operand(other, a, symbol)
    check_logical(a, symbol)
    check_logical(b, symbol)
    check_binary(symbol, a, b)
    return a.wrap(getattr(a.backend.xp, name)(a.data, b.data))


def check_logical(x: TensorBase, symbol: str) -> None:
    """A bool (or integer) tensor, as the logic operators need."""
    if x.dtype.kind not in "biu":
        raise TypeError(f"{symbol}: needs bool (or integer) tensors, got {x.dtype.name}; "
                        "make a mask by comparing first, e.g. (x > 0)")

"""Checking and normalizing the ``axis`` arguments of reductions and shape ops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minitorch_accum.ops.function import OpError

__all__ = ["axis_argument", "keepdims_argument", "normalize_axes", "normalize_axis"]


def normalize_axis(axis: int, ndim: int, op: str, shape: tuple[int, ...]) -> int:
    """One axis, negative allowed, as a non-negative index; an OpError names the op and shape."""
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise OpError(f"{op}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise OpError(f"{op}: axis {axis} is out of range for a tensor of shape {shape}")
    return axis % ndim


def normalize_axes(
    axis: int | Sequence[int] | None, ndim: int, op: str, shape: tuple[int, ...]
) -> tuple[int, ...]:
    """``None`` (all axes), an int or a sequence of ints as a sorted tuple of distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    normalized = tuple(sorted(normalize_axis(a, ndim, op, shape) for a in axes))
    if len(set(normalized)) != len(normalized):
        raise OpError(f"{op}: repeated axis in {axis!r}")
    return normalized


def axis_argument(op: str, axis: Any, dim: Any) -> Any:
    """The axis an op was given, by its NumPy/Burn name ``axis`` or its PyTorch name ``dim``."""
    if dim is None:
        return axis
    if axis is not None:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; dim is PyTorch's name for axis, give one")
    return dim


def keepdims_argument(op: str, keepdims: bool, keepdim: bool | None) -> bool:
    """``keepdims`` (NumPy's name) or ``keepdim`` (PyTorch's); contradicting values are an error."""
    if keepdim is None:
        return bool(keepdims)
    if keepdims and not keepdim:
        raise TypeError(f"{op}: got keepdims=True and keepdim=False; keepdim is PyTorch's name for keepdims")
    return bool(keepdim)

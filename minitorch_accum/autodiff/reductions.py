"""Tensor's reductions: sum, mean, var, std, max and min (with their arg forms), topk, logsumexp, softmax.

Axes are named ``axis``/``keepdims`` (NumPy, Burn) or ``dim``/``keepdim`` (PyTorch); each
reduction is one op of ``ops.reduce`` or ``ops.softmax``, checked here so that an error names
the method and the shape. ``ReductionMixin`` holds them for Tensor, which inherits it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Self

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.graph import TensorBase, apply
from minitorch_accum.autodiff.operands import binary
from minitorch_accum.backend import int64
from minitorch_accum.ops.axes import axis_argument, keepdims_argument, normalize_axes, normalize_axis
from minitorch_accum.ops.function import Function, OpError

__all__ = ["ReductionMixin", "ValuesIndices"]


class ValuesIndices(NamedTuple):
    """``max(dim=...)``, ``min(dim=...)`` and ``topk``: the values and their int64 indices, as PyTorch returns."""

    values: Any
    indices: Any


class ReductionMixin:
    """Reductions over axes and along one axis (see the module docstring)."""

    __slots__ = ()

    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
            dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Self:
        return _reduce(ops.Sum, "sum", self, axis, keepdims, dim, keepdim)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
             dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Self:
        return _reduce(ops.Mean, "mean", self, axis, keepdims, dim, keepdim)

    def var(self, axis: int | Sequence[int] | None = None, unbiased: bool | None = None,
            keepdims: bool = False, *, correction: float | None = None,
            dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Self:
        """Variance over ``axis``: sum((x - mean)^2) / (N - correction), ``correction=1`` (unbiased)
        by default, as PyTorch; ``unbiased=False`` is ``correction=0``."""
        if unbiased is not None and correction is not None:
            raise TypeError("var: give unbiased or correction, not both")
        if correction is None:
            correction = 0 if unbiased is False else 1
        axes = normalize_axes(axis_argument("var", axis, dim), self.ndim, "var", self.shape)
        keep = keepdims_argument("var", keepdims, keepdim)
        count = math.prod(self.shape[a] for a in axes)
        centered = self - self.mean(axes, keepdims=True)
        # N <= correction divides by 0 (inf or nan), as PyTorch does
        return (centered * centered).sum(axes, keepdims=keep) / float(max(count - correction, 0))

    def std(self, axis: int | Sequence[int] | None = None, unbiased: bool | None = None,
            keepdims: bool = False, *, correction: float | None = None,
            dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Self:
        """Standard deviation over ``axis``: the square root of ``var`` with the same arguments,
        so unbiased (``correction=1``) by default, as PyTorch's ``std``."""
        return self.var(axis, unbiased, keepdims, correction=correction, dim=dim, keepdim=keepdim).sqrt()

    def max(self, axis: Any = None, keepdims: bool = False, *, dim: int | None = None,
            keepdim: bool | None = None) -> Any:
        """The largest values.

        * ``x.max(axis)`` / ``x.max(axis=...)`` (NumPy, Burn): the values over ``axis`` (all axes
          when None); tied maxima share the gradient.
        * ``x.max(dim=d)`` (PyTorch): ``ValuesIndices(values, indices)`` along the one axis ``d``;
          the gradient goes to the index taken (the first maximum), as PyTorch's.
        * ``x.max(other_tensor)``: the elementwise maximum, as ``torch.max(a, b)``.
        """
        return _extreme(self, "max", axis, keepdims, dim, keepdim)

    def min(self, axis: Any = None, keepdims: bool = False, *, dim: int | None = None,
            keepdim: bool | None = None) -> Any:
        """The smallest values; the same three forms as ``max``."""
        return _extreme(self, "min", axis, keepdims, dim, keepdim)

    def argmax(self, axis: int | None = None, keepdims: bool = False, *, dim: int | None = None,
               keepdim: bool | None = None) -> Self:
        """int64 indices of the first maximum along ``axis`` (of the flattened tensor when None)."""
        return _arg_extreme(self, "argmax", axis, keepdims, dim, keepdim)

    def argmin(self, axis: int | None = None, keepdims: bool = False, *, dim: int | None = None,
               keepdim: bool | None = None) -> Self:
        """int64 indices of the first minimum along ``axis`` (of the flattened tensor when None)."""
        return _arg_extreme(self, "argmin", axis, keepdims, dim, keepdim)

    def topk(self, k: int, axis: int | None = None, largest: bool = True, sorted: bool = True, *,
             dim: int | None = None) -> ValuesIndices:
        """The ``k`` largest (``largest=False``: smallest) values along ``axis`` (PyTorch: ``dim``;
        the last axis by default) and their int64 indices, as PyTorch's ``topk``.

        ``sorted=True`` lists them best first, equal values by lower index first; ``sorted=False``
        lists the same ones in the order they stand in the tensor. NaN counts as larger than any
        number, as in PyTorch. The gradient goes to the places taken."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise TypeError(f"topk: k must be an int, got {type(k).__name__}")
        if self.ndim == 0:
            raise OpError("topk: needs a tensor of at least one axis, got a 0-d tensor")
        chosen = axis_argument("topk", axis, dim)
        ax = normalize_axis(-1 if chosen is None else chosen, self.ndim, "topk", self.shape)
        if not 0 <= k <= self.shape[ax]:
            raise OpError(f"topk: k={k} is out of range for axis {ax} of length {self.shape[ax]} "
                          f"(shape {self.shape})")
        order = _best_first(self.backend.xp, self.data, ax, largest)
        taken = order[(slice(None),) * ax + (slice(0, int(k)),)]
        if not sorted:
            taken = self.backend.xp.sort(taken, axis=ax)
        indices = self.wrap(taken.astype(int64))
        return ValuesIndices(self.gather(ax, indices), indices)

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
                  dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Self:
        return _reduce(ops.LogSumExp, "logsumexp", self, axis, keepdims, dim, keepdim)

    def softmax(self, axis: int | None = None, *, dim: int | None = None) -> Self:
        """Softmax along ``axis`` (PyTorch: ``dim``), the last axis by default."""
        return _along_axis(ops.Softmax, "softmax", self, axis, dim)

    def log_softmax(self, axis: int | None = None, *, dim: int | None = None) -> Self:
        return _along_axis(ops.LogSoftmax, "log_softmax", self, axis, dim)


def _reduce(fn: type[Function], op: str, x: Any, axis: Any, keepdims: bool, dim: Any = None,
            keepdim: bool | None = None) -> Any:
    axes = normalize_axes(axis_argument(op, axis, dim), x.ndim, op, x.shape)
    return apply(fn, x, axes=axes, keepdims=keepdims_argument(op, keepdims, keepdim))


def _along_axis(fn: type[Function], op: str, x: Any, axis: int | None, dim: int | None) -> Any:
    chosen = axis_argument(op, axis, dim)
    return apply(fn, x, axis=normalize_axis(-1 if chosen is None else chosen, x.ndim, op, x.shape))


def _extreme(x: Any, op: str, axis: Any, keepdims: bool, dim: int | None, keepdim: bool | None) -> Any:
    """``max``/``min`` in their three forms (see ``ReductionMixin.max``)."""
    if isinstance(axis, TensorBase):
        return binary(ops.Maximum if op == "max" else ops.Minimum, op, x, axis)
    if x.size == 0:
        raise OpError(f"{op}: cannot reduce an empty tensor of shape {x.shape}")
    if dim is None:
        return _reduce(ops.Max if op == "max" else ops.Min, op, x, axis, keepdims, None, keepdim)
    if axis is not None or not isinstance(dim, int):
        raise TypeError(f"{op}: dim= (PyTorch's form, returning values and indices) takes one int axis; "
                        f"got axis={axis!r}, dim={dim!r}")
    keep = keepdims_argument(op, keepdims, keepdim)
    indices = _arg_extreme(x, "arg" + op, dim, True, None, None)
    values = x.gather(dim, indices)  # the gradient goes to the chosen index, as PyTorch's
    if not keep:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return ValuesIndices(values, indices)


def _stable_argsort(xp: Any, data: Any, axis: int) -> Any:
    # NumPy's default sort is not stable; CuPy's always is and takes no other kind
    return xp.argsort(data, axis=axis, kind="stable") if xp is np else xp.argsort(data, axis=axis)


def _best_first(xp: Any, data: Any, axis: int, largest: bool) -> Any:
    """Indices ordering ``data`` along ``axis``, largest (or smallest) first, ties by lower index,
    NaN as the largest (ascending sorts put it last)."""
    if not largest:
        return _stable_argsort(xp, data, axis)
    # descending without negating (ints would overflow): sort the reversed axis ascending and read it
    # backwards, which keeps ties in index order and puts NaN first
    length = data.shape[axis]
    backwards = _stable_argsort(xp, xp.flip(data, axis=axis), axis)
    return (length - 1) - xp.flip(backwards, axis=axis)


def _arg_extreme(x: Any, op: str, axis: int | None, keepdims: bool, dim: int | None,
                 keepdim: bool | None) -> Any:
    chosen = axis_argument(op, axis, dim)
    if x.size == 0:
        raise OpError(f"{op}: cannot reduce an empty tensor of shape {x.shape}")
    ax = None if chosen is None else normalize_axis(chosen, max(x.ndim, 1), op, x.shape)
    data = x.data if x.ndim else x.data.reshape(1)
    out = getattr(x.backend.xp, op)(data, axis=ax, keepdims=keepdims_argument(op, keepdims, keepdim))
    return x.wrap(out.astype(int64))

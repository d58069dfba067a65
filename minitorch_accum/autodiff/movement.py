"""Tensor's movement methods: reshape, permute, broadcast, repeat, split, index, and the triangles.

Each moves or selects data without arithmetic and is one op of ``ops.shape`` (or a
composition of them), checked here so that an error names the method and the shape.
``MovementMixin`` holds them for Tensor, which inherits it (tinygrad's rooms): they need of
their host only what every tensor has (``shape``, ``ndim``, ``backend``, ``masked_fill``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.graph import TensorBase, apply
from minitorch_accum.ops.axes import axis_argument, normalize_axes, normalize_axis
from minitorch_accum.ops.function import OpError

__all__ = ["MovementMixin", "shape_arguments"]


def shape_arguments(values: tuple[Any, ...]) -> tuple[int, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` alike."""
    return tuple(values[0]) if len(values) == 1 and not isinstance(values[0], int) else tuple(values)


class MovementMixin:
    """Reshaping, permuting, broadcasting, splitting and indexing (see the module docstring)."""

    __slots__ = ()

    def reshape(self, *shape: int | Sequence[int]) -> Self:
        return apply(ops.Reshape, self, shape=_check_reshape(self.shape, shape_arguments(shape)))

    def view(self, *shape: int | Sequence[int]) -> Self:
        """``reshape`` (PyTorch's name; arrays here need no contiguity for it)."""
        return self.reshape(*shape)

    def contiguous(self) -> Self:
        """This tensor: every array here is usable as it is (PyTorch habit, a no-op)."""
        return self

    def flatten(self, start_axis: int | None = None, end_axis: int | None = None, *, start_dim: int | None = None,
                end_dim: int | None = None) -> Self:
        """Merge axes ``start_axis..end_axis`` (inclusive, default all; PyTorch: ``start_dim``,
        ``end_dim``) into one."""
        start = axis_argument("flatten", start_axis, start_dim)
        end = axis_argument("flatten", end_axis, end_dim)
        start = 0 if start is None else start
        end = -1 if end is None else end
        rank = max(self.ndim, 1)
        first = normalize_axis(start, rank, "flatten", self.shape)
        last = normalize_axis(end, rank, "flatten", self.shape)
        if first > last:
            raise OpError(f"flatten: start axis {start} comes after end axis {end} for shape {self.shape}")
        return self.reshape(self.shape[:first] + (-1,) + self.shape[last + 1:])

    def unsqueeze(self, axis: int | None = None, *, dim: int | None = None) -> Self:
        """A new axis of size 1 at ``axis`` (PyTorch: ``dim``; negative counts from the new end)."""
        chosen = axis_argument("unsqueeze", axis, dim)
        if chosen is None:
            raise TypeError("unsqueeze: needs the position of the new axis (axis= or dim=)")
        at = normalize_axis(chosen, self.ndim + 1, "unsqueeze", self.shape)
        return self.reshape(self.shape[:at] + (1,) + self.shape[at:])

    def squeeze(self, axis: int | Sequence[int] | None = None, *, dim: int | Sequence[int] | None = None) -> Self:
        """Drop size-1 axes: all of them, or those of ``axis`` that have size 1 (others stay, as PyTorch)."""
        chosen = axis_argument("squeeze", axis, dim)
        axes = normalize_axes(chosen, self.ndim, "squeeze", self.shape)
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if not (i in axes and n == 1)))

    def permute(self, *axes: int | Sequence[int]) -> Self:
        order = shape_arguments(axes)
        if sorted(normalize_axis(a, self.ndim, "permute", self.shape) for a in order) != list(range(self.ndim)):
            raise OpError(f"permute: {tuple(order)} is not a permutation of the axes of shape {self.shape}")
        return apply(ops.Permute, self, axes=tuple(a % self.ndim for a in order))

    def transpose(self, axis0: int | None = None, axis1: int | None = None, *, dim0: int | None = None,
                  dim1: int | None = None) -> Self:
        """Swap two axes (the last two by default; PyTorch: ``dim0``, ``dim1``)."""
        if self.ndim < 2:
            raise OpError(f"transpose: needs at least 2 axes, got shape {self.shape}")
        first = axis_argument("transpose", axis0, dim0)
        second = axis_argument("transpose", axis1, dim1)
        order = list(range(self.ndim))
        a = normalize_axis(-2 if first is None else first, self.ndim, "transpose", self.shape)
        b = normalize_axis(-1 if second is None else second, self.ndim, "transpose", self.shape)
        order[a], order[b] = order[b], order[a]
        return apply(ops.Permute, self, axes=tuple(order))

    @property
    def T(self) -> Self:
        """All axes reversed (the matrix transpose for 2-D tensors)."""
        return apply(ops.Permute, self, axes=tuple(reversed(range(self.ndim))))

    def t(self) -> Self:
        """The transpose of a matrix; a 0-D or 1-D tensor as it is (PyTorch's ``t()``)."""
        if self.ndim > 2:
            raise OpError(f"t: expects a tensor of at most 2 axes, got shape {self.shape}; "
                          "use transpose(dim0, dim1) or mT for a batch of matrices")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def mT(self) -> Self:
        """The last two axes swapped (a batch of matrices transposed), as PyTorch's ``mT``."""
        if self.ndim < 2:
            raise OpError(f"mT: needs at least 2 axes, got shape {self.shape}")
        return self.transpose(-2, -1)

    def broadcast_to(self, shape: Sequence[int]) -> Self:
        target = tuple(shape)
        try:
            np.broadcast_shapes(self.shape, target)
        except ValueError:
            raise OpError(f"broadcast_to: cannot broadcast shape {self.shape} to {target}") from None
        if np.broadcast_shapes(self.shape, target) != target:
            raise OpError(f"broadcast_to: cannot broadcast shape {self.shape} to {target}")
        return apply(ops.BroadcastTo, self, shape=target)

    def expand(self, *sizes: int | Sequence[int]) -> Self:
        """``broadcast_to`` the PyTorch way: -1 keeps an axis's size; new axes go in front."""
        target = shape_arguments(sizes)
        extra = len(target) - self.ndim
        if extra < 0 or any(n == -1 for n in target[:extra]):
            raise OpError(f"expand: cannot expand shape {self.shape} to {target}")
        return self.broadcast_to(tuple(self.shape[i - extra] if n == -1 else n for i, n in enumerate(target)))

    def repeat(self, *repeats: int | Sequence[int]) -> Self:
        """This tensor tiled ``repeats[i]`` times along axis i (PyTorch's ``repeat``: it copies,
        where ``expand`` broadcasts); more repeats than axes add leading axes."""
        counts = shape_arguments(repeats)
        if not counts:
            raise TypeError("repeat: needs the repeat counts, one per axis (x.repeat(2, 1))")
        if len(counts) < self.ndim:
            raise OpError(f"repeat: {len(counts)} repeat count(s) {counts} for a tensor of {self.ndim} axes "
                          f"(shape {self.shape}): give at least one per axis")
        if any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0 for n in counts):
            raise OpError(f"repeat: repeat counts must be non-negative ints, got {counts}")
        return apply(ops.Repeat, self, repeats=tuple(int(n) for n in counts))

    def split(self, split_size_or_sections: int | Sequence[int], axis: int | None = None, *,
              dim: int | None = None) -> tuple[Self, ...]:
        """Pieces along ``axis`` (PyTorch: ``dim``, default 0): of ``split_size`` each (the last
        may be smaller), or of the sizes listed, which must add up to the axis's length."""
        chosen = axis_argument("split", axis, dim)
        ax = normalize_axis(0 if chosen is None else chosen, self.ndim, "split", self.shape)
        length = self.shape[ax]
        if isinstance(split_size_or_sections, int):
            if split_size_or_sections <= 0:
                raise OpError(f"split: split size must be positive, got {split_size_or_sections}")
            sizes = [min(split_size_or_sections, length - s) for s in range(0, length, split_size_or_sections)]
        else:
            sizes = [int(n) for n in split_size_or_sections]
            if sum(sizes) != length or any(n < 0 for n in sizes):
                raise OpError(f"split: sizes {tuple(sizes)} do not add up to {length}, the length of axis "
                              f"{ax} of shape {self.shape}")
        return _pieces(self, ax, sizes)

    def chunk(self, chunks: int, axis: int | None = None, *, dim: int | None = None) -> tuple[Self, ...]:
        """At most ``chunks`` pieces of ceil(length / chunks) along ``axis`` (PyTorch: ``dim``)."""
        if not isinstance(chunks, int) or chunks <= 0:
            raise OpError(f"chunk: chunks must be a positive int, got {chunks!r}")
        chosen = axis_argument("chunk", axis, dim)
        ax = normalize_axis(0 if chosen is None else chosen, self.ndim, "chunk", self.shape)
        return self.split(max(-(-self.shape[ax] // chunks), 1), ax)

    def gather(self, dim: int, index: Any) -> Self:
        """``out[i][j] = x[index[i][j]][j]`` for dim 0 (PyTorch's gather); ``index`` has this
        tensor's rank and its shape on every other axis."""
        ax = normalize_axis(dim, self.ndim, "gather", self.shape)
        data = index.data if isinstance(index, TensorBase) else self.backend.asarray(index)
        if data.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {data.dtype.name}")
        if data.ndim != self.ndim or any(data.shape[i] != self.shape[i] for i in range(self.ndim) if i != ax):
            raise OpError(f"gather: index of shape {tuple(data.shape)} does not fit a tensor of shape "
                          f"{self.shape} along axis {ax}")
        return apply(ops.Gather, self, index=data, axis=ax)

    def __getitem__(self, index: Any) -> Self:
        index = _convert_index(index)
        try:
            return apply(ops.GetItem, self, index=index)
        except IndexError as exc:
            raise IndexError(f"getitem: index {index!r} is invalid for shape {self.shape}: {exc}") from None

    def tril(self, diagonal: int = 0) -> Self:
        """The lower triangle of the last two axes (above ``diagonal`` set to 0)."""
        return self.masked_fill(~_triangle(self, "tril", diagonal), 0)

    def triu(self, diagonal: int = 0) -> Self:
        """The upper triangle of the last two axes (below ``diagonal`` set to 0)."""
        return self.masked_fill(_triangle(self, "triu", diagonal - 1), 0)


def _pieces(x: Any, axis: int, sizes: Sequence[int]) -> tuple[Any, ...]:
    pieces = []
    start = 0
    for size in sizes:
        index = (slice(None),) * axis + (slice(start, start + size),)
        pieces.append(x[index])
        start += size
    return tuple(pieces)


def _triangle(x: Any, op: str, diagonal: int) -> Any:
    """Bool array of the last two axes' shape, True on and below the ``diagonal``-th diagonal."""
    if x.ndim < 2:
        raise OpError(f"{op}: needs at least 2 axes, got shape {x.shape}")
    return x.backend.xp.tri(x.shape[-2], x.shape[-1], k=diagonal, dtype=bool)


def _check_reshape(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(shape)
    unknown = [i for i, s in enumerate(target) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in target):
        raise OpError(f"reshape: invalid target shape {target}")
    known = math.prod(s for s in target if s != -1)
    if unknown:
        if known == 0 or size % known:
            raise OpError(f"reshape: cannot reshape a tensor of shape {shape} ({size} elements) into {target}")
        target = tuple(size // known if s == -1 else s for s in target)
    if math.prod(target) != size:
        raise OpError(f"reshape: cannot reshape a tensor of shape {shape} ({size} elements) into {target}")
    return target


def _convert_index(index: Any) -> Any:
    if isinstance(index, TensorBase):
        return index.data
    if isinstance(index, tuple):
        return tuple(_convert_index(i) for i in index)
    if isinstance(index, list):
        return np.asarray(index)
    return index

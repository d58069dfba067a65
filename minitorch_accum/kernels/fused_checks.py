"""Argument checks of the fused layer kernels (GELU, LayerNorm, cross entropy, embedding backward).

The native module makes the same checks in the same order with the same messages
(csrc/native/fused_args.cpp): every array is checked to be one (TypeError), then the dtypes
(TypeError), then the layouts (ValueError: C-contiguous, writeable where written), then the
shapes (ValueError), then that no written array overlaps another, then the integer values
(targets, ids: ValueError). Each message names the kernel, the argument, its shape and dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.validation import CallArrays, describe

__all__ = ["FusedArgs", "check_ids", "check_targets"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_FLOAT64 = np.dtype(np.float64)
_INT64 = np.dtype(np.int64)


class FusedArgs:
    """One call's arrays, by role: ``(role, array, written)`` in argument order. ``floats``: the
    roles of the call's float dtype, the first one setting it; ``float64``, ``int64``: roles of
    that fixed dtype; ``optional``: roles that may be None (left out)."""

    def __init__(self, kernel: str, arrays: Sequence[tuple[str, Array | None, bool]], *, floats: Sequence[str],
                 float64: Sequence[str] = (), int64: Sequence[str] = (), optional: Sequence[str] = ()) -> None:
        self.kernel = kernel
        self._calls = CallArrays(kernel)
        for role, a, written in arrays:
            if a is not None or role not in optional:
                self._calls.add(role, a, written)
        self.present = {role: a for role, a, _ in arrays if a is not None}
        first = floats[0]
        x = self.present[first]
        if x.dtype not in _FLOATS:
            raise TypeError(f"{kernel}: unsupported dtype {describe(first, x)}; supported: float32, float64")
        for role in floats[1:]:
            if role in self.present and self.present[role].dtype != x.dtype:
                raise TypeError(f"{kernel}: {describe(role, self.present[role])} must have the dtype of "
                                f"{describe(first, x)}")
        for names, wanted in ((float64, _FLOAT64), (int64, _INT64)):
            for role in names:
                if role in self.present and self.present[role].dtype != wanted:
                    raise TypeError(f"{kernel}: {describe(role, self.present[role])} must be {wanted}")
        for role, a, written in arrays:
            if a is None:
                continue
            if not a.flags.c_contiguous:
                raise ValueError(f"{kernel}: {describe(role, a)} must be C-contiguous")
            if written and not getattr(a.flags, "writeable", True):
                raise ValueError(f"{kernel}: {describe(role, a)} is read-only")

    def axes(self, role: str, ndim: int) -> None:
        """ValueError unless the array has ``ndim`` axes."""
        a = self.present[role]
        if a.ndim != ndim:
            raise ValueError(f"{self.kernel}: {describe(role, a)} must have {ndim} ax{'is' if ndim == 1 else 'es'}")

    def shape(self, role: str, shape: tuple[int, ...], like: str) -> None:
        """ValueError unless the array (if given) has ``shape``, which ``like``'s shape sets."""
        a = self.present.get(role)
        if a is not None and tuple(a.shape) != shape:
            raise ValueError(f"{self.kernel}: {describe(role, a)} must have shape {shape} to match "
                             f"{describe(like, self.present[like])}")

    def disjoint(self) -> None:
        self._calls.require_disjoint()


def _first_bad(values: Array, bad: Array) -> tuple[int, int]:
    index = int(np.flatnonzero(np.asarray(bad.get() if hasattr(bad, "get") else bad))[0])
    return index, int(values[index])


def check_targets(kernel: str, targets: Array, classes: int, ignore_index: int) -> None:
    """ValueError naming the first target that is neither a class index nor ``ignore_index``."""
    bad = (targets != ignore_index) & ((targets < 0) | (targets >= classes))
    if targets.size and bool(bad.any()):
        index, value = _first_bad(targets, bad)
        raise ValueError(f"{kernel}: targets[{index}] = {value} is out of range for {classes} classes "
                         f"(ignore_index={ignore_index})")


def check_ids(kernel: str, ids: Array, rows: int) -> None:
    """ValueError naming the first id outside [0, rows)."""
    bad = (ids < 0) | (ids >= rows)
    if ids.size and bool(bad.any()):
        index, value = _first_bad(ids, bad)
        raise ValueError(f"{kernel}: ids[{index}] = {value} is out of range for {rows} rows")

"""Argument checks for the NumPy reference, the emulated and the CuPy paths.

The native module makes the same checks in C++ (csrc/native/array_args.cpp),
in the same order, with the same messages: each names the kernel, the
argument, its shape and its dtype. Errors are TypeError for a wrong type or
dtype (None where an array belongs included), ValueError for a wrong size,
layout, length, or memory shared with an array the kernel writes.

A call's checks run item by item; each array checked is recorded in a
``CallArrays`` (role, array, written), and ``require_disjoint`` then looks for
overlaps over all of them at once.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence

import numpy as np

from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.dtypes import (
    ACCUMULATE_KINDS,
    BFLOAT16_KINDS,
    LOW_PRECISION,
    NORM_DTYPES,
    OPTIMIZER_DTYPES,
    SUPPORTED_PAIRS_TEXT,
    SUPPORTED_WITH_BFLOAT16_TEXT,
)

__all__ = [
    "ADAM_ARRAYS",
    "SGD_ARRAYS",
    "CallArrays",
    "check_accumulate",
    "check_lengths",
    "check_norm",
    "check_step",
    "check_stochastic",
    "describe",
    "finite_number",
    "real_number",
    "roles",
    "stream_integer",
]


# The arrays of one tensor of each optimizer step, by role (a list of them adds "s").
SGD_ARRAYS = ("param", "grad", "momentum_buf")
ADAM_ARRAYS = ("param", "grad", "exp_avg", "exp_avg_sq")


def describe(role: str, a: Array) -> str:
    """'acc (shape (3, 4), float32)'"""
    return f"{role} (shape {tuple(a.shape)}, {a.dtype})"


def real_number(kernel: str, name: str, value: object) -> float:
    """``value`` as a float; TypeError naming the kernel and the argument for None, a string, an array..."""
    if type(value) is float:
        return value
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"{kernel}: {name} must be a real number, got {type(value).__qualname__}")


def finite_number(kernel: str, name: str, value: object) -> float:
    """``real_number`` that is finite: ValueError naming the kernel and the argument for NaN or an
    infinity (an optimizer step would write NaN into every parameter)."""
    number = real_number(kernel, name, value)
    if not math.isfinite(number):
        raise ValueError(f"{kernel}: {name} must be finite, got {number!r}")
    return number


def stream_integer(kernel: str, name: str, value: object, bits: int) -> int:
    """An integer argument of the stochastic kernels (seed, window, micro_batch, an offset): TypeError
    unless an int (a bool is not; a NumPy integer is), ValueError outside [0, 2^bits)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{kernel}: {name} must be an int, got {type(value).__qualname__}")
    number = operator.index(value)  # type: ignore[arg-type]
    if not 0 <= number < 1 << bits:
        raise ValueError(f"{kernel}: {name} must be in [0, 2**{bits}), got {number}")
    return number


def roles(names: Sequence[str], index: int | None) -> list[str]:
    """The roles of one item: the singular names of a single-array call (index None), else
    the list names with the item's index: ("acc", "g") or ("accs[3]", "gs[3]")."""
    if index is None:
        return list(names)
    return [f"{name}s[{index}]" for name in names]


def _address(a: Array) -> int:
    if isinstance(a, np.ndarray):
        return int(a.__array_interface__["data"][0])
    return int(a.data.ptr)  # CuPy: a device address (all arrays of a call are on one device)


class CallArrays:
    """The arrays of one call, checked one by one; then ``require_disjoint`` over all of them."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.entries: list[tuple[str, Array, bool]] = []

    def add(self, role: str, a: Array, written: bool) -> None:
        """TypeError unless ``a`` is a NumPy or CuPy array in native byte order."""
        if a is None or not hasattr(a, "dtype") or not hasattr(a, "flags"):
            raise TypeError(f"{self.kernel}: {role} must be a NumPy or CuPy array, got {type(a).__qualname__}")
        if not a.dtype.isnative:
            raise TypeError(f"{self.kernel}: {describe(role, a)} must be in native byte order")
        self.entries.append((role, a, written))

    def require_disjoint(self) -> None:
        """ValueError naming both arrays when one the kernel writes shares memory with another.

        Sorted by first byte (then argument order), a span overlaps an earlier one exactly
        when it starts before the farthest end seen so far; keeping that end for written
        arrays and for all arrays finds every overlap involving a written array, and names
        the same pair as the native module does.
        """
        spans = []
        for index, (_, a, _) in enumerate(self.entries):
            if a.size:
                # the bytes the strides reach (a broadcast view fewer than nbytes, a strided one more)
                reaches = [(n - 1) * stride for n, stride in zip(a.shape, a.strides, strict=True)]
                first = _address(a)
                spans.append((first + sum(r for r in reaches if r < 0), index,
                              first + sum(r for r in reaches if r > 0) + a.dtype.itemsize))
        spans.sort()
        farthest_written: tuple[int, int, int] | None = None
        farthest: tuple[int, int, int] | None = None
        for span in spans:
            begin, index, end = span
            written = self.entries[index][2]
            other = None
            if farthest_written is not None and begin < farthest_written[2]:
                other = farthest_written
            elif written and farthest is not None and begin < farthest[2]:
                other = farthest
            if other is not None:
                first_role, first, _ = self.entries[min(index, other[1])]
                second_role, second, _ = self.entries[max(index, other[1])]
                raise ValueError(
                    f"{self.kernel}: {describe(first_role, first)} and {describe(second_role, second)} share "
                    "memory; an array the kernel writes must not overlap its other arrays"
                )
            if written and (farthest_written is None or end > farthest_written[2]):
                farthest_written = span
            if farthest is None or end > farthest[2]:
                farthest = span


def _contiguous(kernel: str, role: str, a: Array, written: bool) -> None:
    if not a.flags.c_contiguous:
        raise ValueError(f"{kernel}: {describe(role, a)} must be C-contiguous")
    if written and not getattr(a.flags, "writeable", True):
        raise ValueError(f"{kernel}: {describe(role, a)} is read-only")


def _same_size(kernel: str, a_role: str, a: Array, b_role: str, b: Array) -> None:
    if a.size != b.size:
        raise ValueError(
            f"{kernel}: {describe(a_role, a)} and {describe(b_role, b)} must have the same number of elements"
        )


def check_lengths(kernel: str, named: Sequence[tuple[str, object]]) -> list[Sequence[Array]]:
    """The named values, each a list or tuple (TypeError otherwise) of the first one's length (ValueError
    otherwise)."""
    lists: list[Sequence[Array]] = []
    for role, items in named:
        if not isinstance(items, (list, tuple)):
            raise TypeError(f"{kernel}: {role} must be a list or tuple of arrays, got {type(items).__qualname__}")
        lists.append(items)
    lengths = [len(items) for items in lists]
    if len(set(lengths)) > 1:
        roles_text = ", ".join(role for role, _ in named[:-1]) + f" and {named[-1][0]}"
        counts = ", ".join(str(n) for n in lengths[:-1]) + f" and {lengths[-1]}"
        raise ValueError(f"{kernel}: {roles_text} must have the same length, got {counts}")
    return lists


def _check_flag(arrays: CallArrays, flag: Array | None) -> None:
    if flag is None:
        return
    arrays.add("flag", flag, True)
    if str(flag.dtype) != "int32" or flag.size < 1:
        raise TypeError(
            f"{arrays.kernel}: {describe('flag', flag)} must be an int32 array of shape (1,) (see new_flag)"
        )
    _contiguous(arrays.kernel, "flag", flag, True)


def _items(
    kernel: str, names: Sequence[str], values: Sequence[Array | Sequence[Array] | None], listed: bool,
    optional: bool = False,
) -> list[tuple[Array, ...]]:
    """The call's items: one tuple of arrays, or (listed) one per index of the lists, whose types
    and lengths are checked here. With ``optional``, a state list (past param and grad) that is
    None is left out of the checks and stays None in each item (SGD without momentum)."""
    if not listed:
        return [tuple(values)]
    named = [
        (f"{name}s", value)
        for k, (name, value) in enumerate(zip(names, values, strict=True))
        if not (optional and k >= 2 and value is None)
    ]
    n = len(check_lengths(kernel, named)[0])
    return list(zip(*(value if value is not None else [None] * n for value in values), strict=True))


def check_accumulate(
    kernel: str,
    accs: Array | Sequence[Array],
    comps: Array | Sequence[Array] | None,
    gs: Array | Sequence[Array],
    flag: Array | None,
    *,
    listed: bool,
    compensated: bool,
    cast_only: bool,
) -> list[tuple[Array, Array | None, Array]]:
    """Checks an accumulation's (acc, comp, g) items (comp None unless compensated), then the
    flag, then that nothing written overlaps; returns the items. ``listed``: accs, comps and gs
    are the lists of a multi_* call (comps None unless compensated), else single arrays."""
    if compensated:
        items = _items(kernel, ("acc", "comp", "g"), (accs, comps, gs), listed)
    else:
        items = [(acc, None, g) for acc, g in _items(kernel, ("acc", "g"), (accs, gs), listed)]
    _check_items(kernel, items, flag, listed=listed, compensated=compensated, cast_only=cast_only)
    return items


def check_stochastic(
    kernel: str,
    accs: Array | Sequence[Array],
    gs: Array | Sequence[Array],
    offsets: object,
    flag: Array | None,
    *,
    listed: bool,
    cast_only: bool,
) -> tuple[list[tuple[Array, None, Array]], list[int]]:
    """Checks a stochastic accumulation (its stream's key checked before): the offset (or, listed,
    the offsets list's length with the others' and its values), then the items as
    ``check_accumulate``; returns the items and each one's first stream index (listed without
    offsets: the list numbered as one array)."""
    if not listed:
        first = stream_integer(kernel, "offset", offsets, 64)
        items: list[tuple[Array, None, Array]] = [(accs, None, gs)]
        _check_items(kernel, items, flag, listed=False, compensated=False, cast_only=cast_only, stochastic=True)
        return items, [first]
    named: list[tuple[str, object]] = [("accs", accs), ("gs", gs)]
    if offsets is not None:
        named.append(("offsets", offsets))
    lists = check_lengths(kernel, named)
    firsts = None if offsets is None else [stream_integer(kernel, f"offsets[{i}]", value, 64)
                                           for i, value in enumerate(lists[2])]
    items = [(acc, None, g) for acc, g in zip(lists[0], lists[1], strict=True)]
    _check_items(kernel, items, flag, listed=True, compensated=False, cast_only=cast_only, stochastic=True)
    if firsts is None:
        sizes = [int(acc.size) for acc, _, _ in items]
        firsts = [sum(sizes[:i]) for i in range(len(sizes))]
    return items, firsts


def _check_items(
    kernel: str, items: Sequence[tuple[Array, Array | None, Array]], flag: Array | None, *, listed: bool,
    compensated: bool, cast_only: bool, stochastic: bool = False,
) -> None:
    """Each item's arrays (a bfloat16 accumulator only where not compensated, only a bfloat16 one
    where stochastic), then the flag, then that nothing written overlaps."""
    kinds = ACCUMULATE_KINDS if compensated else {**ACCUMULATE_KINDS, **BFLOAT16_KINDS}
    supported = SUPPORTED_PAIRS_TEXT if compensated else SUPPORTED_WITH_BFLOAT16_TEXT
    arrays = CallArrays(kernel)
    for i, (acc, comp, g) in enumerate(items):
        acc_role, comp_role, g_role = roles(("acc", "comp", "g"), i if listed else None)
        arrays.add(acc_role, acc, True)
        arrays.add(g_role, g, False)
        if kinds.get((acc.dtype, g.dtype)) is None:
            raise TypeError(
                f"{kernel}: unsupported dtypes {describe(acc_role, acc)} with {describe(g_role, g)}; "
                f"supported (acc, g) pairs: {supported}"
            )
        if cast_only and g.dtype not in LOW_PRECISION:
            raise TypeError(
                f"{kernel}: {describe(g_role, g)} must be float16 or bfloat16 into a float32 or bfloat16 "
                f"accumulator, got {describe(acc_role, acc)}"
            )
        if stochastic and (acc.dtype, g.dtype) not in BFLOAT16_KINDS:
            raise TypeError(
                f"{kernel}: {describe(acc_role, acc)} must be bfloat16: stochastic rounding writes a bfloat16 "
                "accumulator"
            )
        _contiguous(kernel, acc_role, acc, True)
        _contiguous(kernel, g_role, g, False)
        _same_size(kernel, acc_role, acc, g_role, g)
        if compensated:
            arrays.add(comp_role, comp, True)
            assert comp is not None  # add refuses None
            if comp.dtype != acc.dtype:
                raise TypeError(
                    f"{kernel}: {describe(comp_role, comp)} must have the dtype of {describe(acc_role, acc)}"
                )
            _contiguous(kernel, comp_role, comp, True)
            _same_size(kernel, acc_role, acc, comp_role, comp)
    _check_flag(arrays, flag)
    arrays.require_disjoint()


def check_norm(kernel: str, tensors: Array | Sequence[Array], *, listed: bool) -> list[Array]:
    """Checks each array of an L2 norm (read only: no overlap rule); returns them as a list.
    ``listed``: tensors is the list of multi_l2_norm, else the one array of l2_norm."""
    arrays = CallArrays(kernel)
    xs = [x for (x,) in _items(kernel, ("tensor",), (tensors,), listed)]
    for i, x in enumerate(xs):
        role = f"tensors[{i}]" if listed else "x"
        arrays.add(role, x, False)
        if NORM_DTYPES.get(x.dtype) is None:
            raise TypeError(
                f"{kernel}: unsupported dtype {describe(role, x)}; supported: float32, float16, bfloat16, float64"
            )
        _contiguous(kernel, role, x, False)
    return xs


def check_step(
    kernel: str,
    names: Sequence[str],
    values: Sequence[Array | Sequence[Array] | None],
    *,
    listed: bool,
    momentum: float | None = None,
) -> list[tuple[Array, ...]]:
    """Checks an optimizer step's (param, grad, *states) items, then that nothing written
    overlaps; returns the items. ``names`` are the singular roles ("param", "grad", "exp_avg",
    ...), ``values`` one array (or, listed, one list) per name.

    States are required (a None is a TypeError, like any non-array) unless ``momentum`` is
    given (SGD): then they may be None when momentum == 0 and are a ValueError when not.
    """
    optional = momentum == 0
    if momentum is not None and not optional and any(v is None for v in values[2:]):
        missing = next(name for name, v in zip(names[2:], values[2:], strict=True) if v is None)
        raise ValueError(f"{kernel}: {missing}{'s' if listed else ''} is required when momentum != 0")
    items = _items(kernel, names, values, listed, optional)
    arrays = CallArrays(kernel)
    for i, item in enumerate(items):
        item_roles = roles(names, i if listed else None)
        p_role, g_role = item_roles[:2]
        p, g = item[:2]
        arrays.add(p_role, p, True)
        arrays.add(g_role, g, False)
        if p.dtype not in OPTIMIZER_DTYPES or g.dtype != p.dtype:
            raise TypeError(
                f"{kernel}: {describe(p_role, p)} and {describe(g_role, g)} must share one dtype, float32 or float64"
            )
        _contiguous(kernel, p_role, p, True)
        _contiguous(kernel, g_role, g, False)
        _same_size(kernel, p_role, p, g_role, g)
        for role, s in zip(item_roles[2:], item[2:], strict=True):
            if s is None and optional:
                continue
            arrays.add(role, s, True)
            if s.dtype != p.dtype:
                raise TypeError(f"{kernel}: {describe(role, s)} must have the dtype of {describe(p_role, p)}")
            _contiguous(kernel, role, s, True)
            _same_size(kernel, p_role, p, role, s)
    arrays.require_disjoint()
    return items

"""Argument checks for the NumPy reference, the emulated and the CuPy paths.

The native module makes the same checks in C++ (csrc/native/array_args.cpp)
with the same messages: each names the kernel, the argument, its shape and
its dtype. Errors are TypeError for a wrong type or dtype, ValueError for a
wrong size, layout or length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minitorch_accum.kernels.dtypes import (
    ACCUMULATE_KINDS,
    LOW_PRECISION,
    NORM_DTYPES,
    OPTIMIZER_DTYPES,
    SUPPORTED_PAIRS_TEXT,
)

__all__ = [
    "check_accumulate",
    "check_accumulate_lists",
    "check_flag",
    "check_lengths",
    "check_norm_input",
    "check_step",
    "describe",
]


def describe(role: str, a: Any) -> str:
    """'acc (shape (3, 4), float32)'"""
    return f"{role} (shape {tuple(a.shape)}, {a.dtype})"


def _contiguous(kernel: str, role: str, a: Any, written: bool) -> None:
    if not a.flags.c_contiguous:
        raise ValueError(f"{kernel}: {describe(role, a)} must be C-contiguous")
    if written and not getattr(a.flags, "writeable", True):
        raise ValueError(f"{kernel}: {describe(role, a)} is read-only")


def _same_size(kernel: str, a_role: str, a: Any, b_role: str, b: Any) -> None:
    if a.size != b.size:
        raise ValueError(
            f"{kernel}: {describe(a_role, a)} and {describe(b_role, b)} must have the same number of elements"
        )


def check_accumulate(
    kernel: str,
    acc: Any,
    g: Any,
    comp: Any = None,
    *,
    compensated: bool = False,
    cast_only: bool = False,
    acc_role: str = "acc",
    g_role: str = "g",
    comp_role: str = "comp",
) -> int:
    """Checks one (acc[, comp], g) triple; returns the pair's kind code."""
    kind = ACCUMULATE_KINDS.get((acc.dtype, g.dtype))
    if kind is None:
        raise TypeError(
            f"{kernel}: unsupported dtypes {describe(acc_role, acc)} with {describe(g_role, g)}; "
            f"supported (acc, g) pairs: {SUPPORTED_PAIRS_TEXT}"
        )
    if cast_only and g.dtype not in LOW_PRECISION:
        raise TypeError(
            f"{kernel}: {describe(g_role, g)} must be float16 or bfloat16 into a float32 "
            f"accumulator, got {describe(acc_role, acc)}"
        )
    _contiguous(kernel, acc_role, acc, True)
    _contiguous(kernel, g_role, g, False)
    _same_size(kernel, acc_role, acc, g_role, g)
    if compensated:
        if comp.dtype != acc.dtype:
            raise TypeError(f"{kernel}: {describe(comp_role, comp)} must have the dtype of {describe(acc_role, acc)}")
        _contiguous(kernel, comp_role, comp, True)
        _same_size(kernel, acc_role, acc, comp_role, comp)
    return kind


def check_accumulate_lists(
    kernel: str,
    accs: Sequence[Any],
    comps: Sequence[Any] | None,
    gs: Sequence[Any],
    *,
    compensated: bool = False,
    cast_only: bool = False,
) -> None:
    """Checks the lists of a multi-tensor accumulation, naming items as accs[i], comps[i], gs[i]."""
    if compensated:
        check_lengths(kernel, [("accs", accs), ("comps", comps), ("gs", gs)])  # type: ignore[list-item]
    else:
        check_lengths(kernel, [("accs", accs), ("gs", gs)])
    for i, (acc, g) in enumerate(zip(accs, gs, strict=True)):
        check_accumulate(
            kernel,
            acc,
            g,
            comps[i] if compensated and comps is not None else None,
            compensated=compensated,
            cast_only=cast_only,
            acc_role=f"accs[{i}]",
            g_role=f"gs[{i}]",
            comp_role=f"comps[{i}]",
        )


def check_flag(kernel: str, flag: Any) -> None:
    if flag is None:
        return
    if str(flag.dtype) != "int32" or flag.size < 1:
        raise TypeError(f"{kernel}: {describe('flag', flag)} must be an int32 array of shape (1,) (see new_flag)")
    _contiguous(kernel, "flag", flag, True)


def check_lengths(kernel: str, named: Sequence[tuple[str, Sequence[Any]]]) -> None:
    """ValueError unless every named list has the first one's length."""
    for role, items in named:
        if not isinstance(items, list | tuple):
            raise TypeError(f"{kernel}: {role} must be a list or tuple of arrays, got {type(items).__qualname__}")
    lengths = [len(items) for _, items in named]
    if len(set(lengths)) > 1:
        roles = ", ".join(role for role, _ in named[:-1]) + f" and {named[-1][0]}"
        counts = ", ".join(str(n) for n in lengths[:-1]) + f" and {lengths[-1]}"
        raise ValueError(f"{kernel}: {roles} must have the same length, got {counts}")


def check_norm_input(kernel: str, role: str, x: Any) -> int:
    """Checks one array of the L2 norm; returns its dtype code."""
    code = NORM_DTYPES.get(x.dtype)
    if code is None:
        raise TypeError(
            f"{kernel}: unsupported dtype {describe(role, x)}; supported: float32, float16, bfloat16, float64"
        )
    _contiguous(kernel, role, x, False)
    return code


def check_step(
    kernel: str,
    p_role: str,
    p: Any,
    g_role: str,
    g: Any,
    states: Sequence[tuple[str, Any, bool]],
) -> None:
    """Checks one tensor of an optimizer step: param, grad and (role, array, required) states."""
    if p.dtype not in OPTIMIZER_DTYPES or g.dtype != p.dtype:
        raise TypeError(
            f"{kernel}: {describe(p_role, p)} and {describe(g_role, g)} must share one dtype, float32 or float64"
        )
    _contiguous(kernel, p_role, p, True)
    _contiguous(kernel, g_role, g, False)
    _same_size(kernel, p_role, p, g_role, g)
    for role, s, required in states:
        if s is None:
            if required:
                reason = " when momentum != 0" if "momentum" in role else ""
                raise ValueError(f"{kernel}: {role} is required{reason}")
            continue
        if s.dtype != p.dtype:
            raise TypeError(f"{kernel}: {describe(role, s)} must have the dtype of {describe(p_role, p)}")
        _contiguous(kernel, role, s, True)
        _same_size(kernel, p_role, p, role, s)

"""The accumulation kernels' Python face: acc (+)= s * g, plain or compensated,
on one array or a list, with an optional non-finite flag.

Each function dispatches on the array type: NumPy arrays take the CPU path of
``kernel_path()`` (native by default), CuPy arrays the CUDA kernels. All are in
place and return None. The scale is rounded once to the accumulator dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels import modes, reference
from minitorch_accum.kernels.dispatch import cpu_path, is_cupy_array, native, one_device
from minitorch_accum.kernels.launch_plan import plan_accumulate, plan_multi_accumulate
from minitorch_accum.kernels.runners import runner_for
from minitorch_accum.kernels.validation import check_accumulate, check_accumulate_lists, check_flag

__all__ = [
    "add_scale",
    "add_scale_compensated",
    "cast_add_scale",
    "copy_scale",
    "copy_scale_compensated",
    "multi_add_scale",
    "multi_add_scale_compensated",
    "multi_cast_add_scale",
    "multi_copy_scale",
    "multi_copy_scale_compensated",
    "new_flag",
]

Array = Any  # numpy.ndarray or cupy.ndarray


def new_flag(like: Array) -> Array:
    """A zeroed int32 array of shape (1,) beside ``like`` (NumPy or CuPy, same device).

    Kernels given it as ``flag=`` set flag[0] = 1 when a gradient holds inf or
    nan (loss scaling); they never clear it.
    """
    if isinstance(like, np.ndarray):
        return np.zeros(1, dtype=np.int32)
    if is_cupy_array(like):
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.zeros(1, dtype=cupy.int32)
    raise TypeError(f"new_flag: like must be a NumPy or CuPy array, got {type(like).__qualname__}")


def _one(
    kernel: str,
    mode: int,
    acc: Array,
    comp: Array | None,
    g: Array,
    scale: float,
    flag: Array | None,
    cast_only: bool = False,
) -> None:
    scale = float(scale)
    compensated = modes.is_compensated(mode)
    if (
        type(acc) is np.ndarray
        and type(g) is np.ndarray
        and (comp is None or type(comp) is np.ndarray)
        and (flag is None or type(flag) is np.ndarray)
    ):
        device = "host"
    else:
        device = one_device(kernel, (("acc", acc), ("comp", comp), ("g", g), ("flag", flag)))
    if device == "host" and _ran_on_host(kernel, compensated, acc, comp, g, scale, flag):
        return
    check_accumulate(kernel, acc, g, comp, compensated=compensated, cast_only=cast_only)
    check_flag(kernel, flag)
    runner = runner_for(device)
    runner.run(plan_accumulate(mode, acc, comp, g, scale, flag, runner.sm_count))


def _ran_on_host(kernel: str, compensated: bool, acc: Any, comp: Any, g: Any, scale: float, flag: Any) -> bool:
    """Run a NumPy call on the native or reference path; False for the emulated path, which
    goes through the same launch planning as CuPy. ``acc``, ``comp``, ``g`` are arrays or lists."""
    path = cpu_path()
    if path == "emulated":
        return False
    module = native() if path == "native" else reference
    if compensated:
        getattr(module, kernel)(acc, comp, g, scale, flag)
    else:
        getattr(module, kernel)(acc, g, scale, flag)
    return True


def _lists_device(kernel: str, named: Sequence[tuple[str, Sequence[Array] | None]], flag: Array | None) -> str:
    for role, items in named:
        if items is not None and not isinstance(items, list | tuple):
            raise TypeError(f"{kernel}: {role} must be a list or tuple of arrays, got {type(items).__qualname__}")
    if (flag is None or type(flag) is np.ndarray) and all(
        type(x) is np.ndarray for _, items in named if items is not None for x in items
    ):
        return "host"
    pairs = [(f"{role}[{i}]", x) for role, items in named if items is not None for i, x in enumerate(items)]
    return one_device(kernel, [*pairs, ("flag", flag)])


def _many(
    kernel: str,
    mode: int,
    accs: Sequence[Array],
    comps: Sequence[Array] | None,
    gs: Sequence[Array],
    scale: float,
    flag: Array | None,
    cast_only: bool = False,
) -> None:
    scale = float(scale)
    compensated = modes.is_compensated(mode)
    named = [("accs", accs), ("comps", comps), ("gs", gs)] if compensated else [("accs", accs), ("gs", gs)]
    device = _lists_device(kernel, named, flag)
    if device == "host" and _ran_on_host(kernel, compensated, accs, comps, gs, scale, flag):
        return
    check_accumulate_lists(kernel, accs, comps, gs, compensated=compensated, cast_only=cast_only)
    check_flag(kernel, flag)
    runner = runner_for(device)
    runner.run(plan_multi_accumulate(mode, accs, comps, gs, scale, flag, runner.address_of))


def add_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc += s * g (12 B/elem fp32). Pairs (acc, g): (f32, f32), (f32, f16), (f32, bf16),
    (f64, f64), (f64, f32); a f16/bf16 g runs the cast kernel."""
    _one("add_scale", modes.ADD, acc, None, g, scale, flag)


def copy_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc = s * g: the first micro-batch of a window, with no zeroing pass (8 B/elem)."""
    _one("copy_scale", modes.COPY, acc, None, g, scale, flag)


def cast_add_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc(f32) += s * float(g) for a float16 or bfloat16 g, in one pass (10 B/elem)."""
    _one("cast_add_scale", modes.ADD, acc, None, g, scale, flag, cast_only=True)


def add_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """Neumaier: t = acc + y; comp += lost low bits; acc = t, with y = s * g. acc + comp is the sum."""
    _one("add_scale_compensated", modes.ADD_COMPENSATED, acc, comp, g, scale, flag)


def copy_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc = s * g and comp = 0: the first micro-batch of a compensated window."""
    _one("copy_scale_compensated", modes.COPY_COMPENSATED, acc, comp, g, scale, flag)


def multi_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """add_scale over lists of (acc, g) of any sizes and supported pairs, in one launch per chunk table."""
    _many("multi_add_scale", modes.ADD, accs, None, gs, scale, flag)


def multi_copy_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """copy_scale over lists."""
    _many("multi_copy_scale", modes.COPY, accs, None, gs, scale, flag)


def multi_cast_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """cast_add_scale over lists (every g float16 or bfloat16)."""
    _many("multi_cast_add_scale", modes.ADD, accs, None, gs, scale, flag, cast_only=True)


def multi_add_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None
) -> None:
    """add_scale_compensated over lists."""
    _many("multi_add_scale_compensated", modes.ADD_COMPENSATED, accs, comps, gs, scale, flag)


def multi_copy_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None
) -> None:
    """copy_scale_compensated over lists."""
    _many("multi_copy_scale_compensated", modes.COPY_COMPENSATED, accs, comps, gs, scale, flag)

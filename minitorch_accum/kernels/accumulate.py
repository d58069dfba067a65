"""The accumulation kernels' Python face: acc (+)= s * g, plain, compensated or (into a
bfloat16 accumulator) stochastically rounded, on one array or a list, with an optional
non-finite flag.

Each function dispatches on the array type: NumPy arrays take the CPU path of
``kernel_path()`` (native by default), CuPy arrays the CUDA kernels. All are in
place and return None. The scale is rounded once to the accumulator dtype.
Each face is typed and documented here and names only its kernel: the mode, the
cast rule and whether it takes lists come from the kernel's row in ``catalog``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from minitorch_accum.kernels import modes
from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.catalog import kernel_info
from minitorch_accum.kernels.dispatch import call_device, host_module, is_cupy_array
from minitorch_accum.kernels.launch.plan import (
    multi_accumulate_launches,
    multi_accumulate_tables,
    plan_accumulate,
    plan_multi_stochastic,
    plan_stochastic,
    planning_settings,
)
from minitorch_accum.kernels.launch.runners import runner_for
from minitorch_accum.kernels.list_memo import ListMemo, Remembered
from minitorch_accum.kernels.validation import check_accumulate, check_stochastic, real_number, stream_integer

__all__ = [
    "add_scale",
    "add_scale_compensated",
    "add_scale_stochastic",
    "cast_add_scale",
    "cast_add_scale_stochastic",
    "copy_scale",
    "copy_scale_compensated",
    "copy_scale_stochastic",
    "multi_add_scale",
    "multi_add_scale_compensated",
    "multi_add_scale_stochastic",
    "multi_cast_add_scale",
    "multi_cast_add_scale_stochastic",
    "multi_copy_scale",
    "multi_copy_scale_compensated",
    "multi_copy_scale_stochastic",
    "new_flag",
]

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


def _call(
    kernel: str,
    accs: Array | Sequence[Array],
    comps: Array | Sequence[Array] | None,
    gs: Array | Sequence[Array],
    scale: float,
    flag: Array | None,
) -> None:
    """One call of a kernel of the accumulate family, its mode from the catalog: accs, comps, gs are
    arrays, or the lists of a multi_* call; comps is None unless the mode is compensated."""
    scale = real_number(kernel, "scale", scale)
    info = kernel_info(kernel)
    mode = info.mode
    assert mode is not None, kernel  # every accumulate row has one
    compensated = modes.is_compensated(mode)
    names, arrays = (("acc", "comp", "g"), (accs, comps, gs)) if compensated else (("acc", "g"), (accs, gs))
    if info.listed:
        _call_listed(kernel, mode, names, arrays, scale, flag, compensated, info.cast_only)
        return
    device = call_device(kernel, names, arrays, listed=False, flag=flag)
    if device == "host" and (module := host_module()) is not None:
        getattr(module, kernel)(*arrays, scale, flag)
        return
    items = check_accumulate(kernel, accs, comps, gs, flag, listed=False, compensated=compensated,
                             cast_only=info.cast_only)
    runner = runner_for(device)
    runner.run(plan_accumulate(mode, *items[0], scale, flag, runner.sm_count))


_LISTS = ListMemo()  # the checked lists of multi_* calls on a device (never the host module's)


def _call_listed(kernel: str, mode: int, names: tuple[str, ...], arrays: tuple[object, ...], scale: float,
                 flag: Array | None, compensated: bool, cast_only: bool) -> None:
    """A multi_* call: on a device, the same arrays as an earlier call skip the checks and the tables."""
    lists = cast(tuple[Sequence[Array], ...], arrays)
    written = [name != "g" for name in names]
    settings = planning_settings()
    remembered = _LISTS.find(kernel, settings, lists, written, flag)
    device = call_device(kernel, names, arrays, listed=True, flag=flag) if remembered is None else remembered.device
    if device == "host" and (module := host_module()) is not None:
        getattr(module, kernel)(*arrays, scale, flag)  # the host module checks in C++ itself
        return
    runner = runner_for(device)
    if remembered is None:
        checked = check_accumulate(kernel, lists[0], lists[1] if compensated else None, lists[-1], flag,
                                   listed=True, compensated=compensated, cast_only=cast_only)
        remembered = Remembered(device, multi_accumulate_tables(mode, checked, runner.address_of))
        _LISTS.remember(kernel, settings, lists, written, flag, remembered)
    items = list(zip(*lists, strict=True))
    runner.run(multi_accumulate_launches(mode, remembered.value, scale, flag, items))


def _call_stochastic(
    kernel: str,
    accs: Array | Sequence[Array],
    gs: Array | Sequence[Array],
    scale: float,
    key: tuple[int, int, int],
    offsets: int | Sequence[int] | None,
    flag: Array | None,
) -> None:
    """One call of a stochastic kernel: ``key`` is (seed, window, micro_batch), ``offsets`` the first
    stream index of acc (a multi_* call: of each acc, or None to number the list as one array)."""
    scale = real_number(kernel, "scale", scale)
    seed, window, micro_batch = (stream_integer(kernel, name, value, bits)
                                 for name, value, bits in zip(("seed", "window", "micro_batch"), key, (64, 32, 32),
                                                              strict=True))
    info = kernel_info(kernel)
    mode = info.mode
    assert mode is not None, kernel
    device = call_device(kernel, ("acc", "g"), (accs, gs), listed=info.listed, flag=flag)
    if device == "host" and (module := host_module()) is not None:
        getattr(module, kernel)(accs, gs, scale, seed, window, micro_batch, offsets, flag)
        return
    items, firsts = check_stochastic(kernel, accs, gs, offsets, flag, listed=info.listed, cast_only=info.cast_only)
    runner = runner_for(device)
    if info.listed:
        runner.run(plan_multi_stochastic(mode, items, firsts, scale, (seed, window, micro_batch), flag,
                                         runner.address_of))
    else:
        acc, _, g = items[0]
        runner.run(plan_stochastic(mode, acc, g, scale, (seed, window, micro_batch, firsts[0]), flag,
                                   runner.sm_count))


def add_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc += s * g (12 B/elem fp32). Pairs (acc, g): (f32, f32), (f32, f16), (f32, bf16),
    (f64, f64), (f64, f32); a f16/bf16 g runs the cast kernel. A bfloat16 acc takes a f32, f16 or
    bf16 g: the sum is a float32 one, rounded back to nearest (ties to even)."""
    _call("add_scale", acc, None, g, scale, flag)


def copy_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc = s * g: the first micro-batch of a window, with no zeroing pass (8 B/elem)."""
    _call("copy_scale", acc, None, g, scale, flag)


def cast_add_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc(f32 or bf16) += s * float(g) for a float16 or bfloat16 g, in one pass (10 B/elem)."""
    _call("cast_add_scale", acc, None, g, scale, flag)


def add_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """Neumaier: t = acc + y; comp += lost low bits; acc = t, with y = s * g. acc + comp is the sum."""
    _call("add_scale_compensated", acc, comp, g, scale, flag)


def copy_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc = s * g and comp = 0: the first micro-batch of a compensated window."""
    _call("copy_scale_compensated", acc, comp, g, scale, flag)


def multi_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """add_scale over lists of (acc, g) of any sizes and supported pairs, in one launch per chunk table."""
    _call("multi_add_scale", accs, None, gs, scale, flag)


def multi_copy_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """copy_scale over lists."""
    _call("multi_copy_scale", accs, None, gs, scale, flag)


def multi_cast_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """cast_add_scale over lists (every g float16 or bfloat16)."""
    _call("multi_cast_add_scale", accs, None, gs, scale, flag)


def multi_add_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None
) -> None:
    """add_scale_compensated over lists."""
    _call("multi_add_scale_compensated", accs, comps, gs, scale, flag)


def multi_copy_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None
) -> None:
    """copy_scale_compensated over lists."""
    _call("multi_copy_scale_compensated", accs, comps, gs, scale, flag)


# --------------------------------------------------------- stochastic rounding into bfloat16


def add_scale_stochastic(acc: Array, g: Array, scale: float, seed: int, window: int, micro_batch: int,
                         offset: int = 0, flag: Array | None = None) -> None:
    """acc(bf16) = SR(float(acc) + s * g) (8 B/elem: a bf16 acc read and written, a fp32 g read).

    The sum is a float32 one; it is then rounded to one of its two bfloat16 neighbours, up with
    probability equal to the fraction of a unit it discards, so the expected result is the sum
    itself. Element i draws its 16 random bits from stream index ``offset + i`` of Philox4x32-10
    keyed by ``seed`` (< 2^64) at (``window``, ``micro_batch``) (each < 2^32): the same bits on
    every path, thread count and launch shape. g may be f32, f16 or bf16."""
    _call_stochastic("add_scale_stochastic", acc, g, scale, (seed, window, micro_batch), offset, flag)


def copy_scale_stochastic(acc: Array, g: Array, scale: float, seed: int, window: int, micro_batch: int,
                          offset: int = 0, flag: Array | None = None) -> None:
    """acc(bf16) = SR(s * g): the first micro-batch of a window (6 B/elem from a fp32 g)."""
    _call_stochastic("copy_scale_stochastic", acc, g, scale, (seed, window, micro_batch), offset, flag)


def cast_add_scale_stochastic(acc: Array, g: Array, scale: float, seed: int, window: int, micro_batch: int,
                              offset: int = 0, flag: Array | None = None) -> None:
    """acc(bf16) = SR(float(acc) + s * float(g)) for a float16 or bfloat16 g, in one pass (6 B/elem)."""
    _call_stochastic("cast_add_scale_stochastic", acc, g, scale, (seed, window, micro_batch), offset, flag)


def multi_add_scale_stochastic(accs: Sequence[Array], gs: Sequence[Array], scale: float, seed: int, window: int,
                               micro_batch: int, offsets: Sequence[int] | None = None,
                               flag: Array | None = None) -> None:
    """add_scale_stochastic over lists, in one launch per chunk table (8 B/elem): ``offsets[i]`` is
    accs[i]'s first stream index (None: the list numbered as one array, each tensor starting where
    the one before ended), so a list of arena views rounds as the arena would."""
    _call_stochastic("multi_add_scale_stochastic", accs, gs, scale, (seed, window, micro_batch), offsets, flag)


def multi_copy_scale_stochastic(accs: Sequence[Array], gs: Sequence[Array], scale: float, seed: int, window: int,
                                micro_batch: int, offsets: Sequence[int] | None = None,
                                flag: Array | None = None) -> None:
    """copy_scale_stochastic over lists."""
    _call_stochastic("multi_copy_scale_stochastic", accs, gs, scale, (seed, window, micro_batch), offsets, flag)


def multi_cast_add_scale_stochastic(accs: Sequence[Array], gs: Sequence[Array], scale: float, seed: int,
                                    window: int, micro_batch: int, offsets: Sequence[int] | None = None,
                                    flag: Array | None = None) -> None:
    """cast_add_scale_stochastic over lists (every g float16 or bfloat16)."""
    _call_stochastic("multi_cast_add_scale_stochastic", accs, gs, scale, (seed, window, micro_batch), offsets,
                     flag)

"""Launch planning shared by the CuPy path and the CPU launch emulator.

Everything about *how* a CUDA kernel is launched lives here: kernel names,
argument lists with their exact C types, grid and block sizes, the
multi-tensor chunk tables (and launching again when a table fills), the
structs passed by value. Both runners (cuda_module.py, emulator.py) execute
the same plans, so the emulator tests exercise this code too. A launch whose
chunk table holds addresses also holds the arrays behind them (``Launch.holds``),
so they outlive it even when the caller's lists are emptied meanwhile by
another thread (the emulator runs with the GIL released).

Chunk table layout (``MtaTensorTable<DEPTH>`` in csrc/multi_tensor.cuh, passed
by value within the 4 KiB every GPU accepts as kernel parameters):
``addresses[DEPTH][T]`` uint64 device addresses (row 0: accumulators or
params; last row of an accumulation table: gradients), ``sizes[T]`` int64
elements, ``kinds[T]`` uint8 dtype code, ``block_to_tensor[320]`` uint8 slot,
``block_to_chunk[320]`` int32 chunk index (chunks of 65536 elements). T is
110/64/48/36 for depth 1/2/3/4. Block b of a launch processes chunk
``block_to_chunk[b]`` of tensor ``block_to_tensor[b]``; a launch is emitted
when either array fills, and a tensor cut by a full table continues in slot 0
of the next one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from minitorch_accum.kernels import modes
from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.catalog import accumulate_kernel
from minitorch_accum.kernels.dtypes import (
    ACCUMULATE_KINDS,
    BFLOAT16_KINDS,
    FLOAT32,
    FLOAT64,
    LOW_PRECISION,
    NORM_DTYPES,
    SHORT_NAMES,
)
from minitorch_accum.kernels.optimizer_scalars import AdamScalars, SgdScalars

__all__ = [
    "CHUNK_SIZE",
    "GRID_STRIDE_BLOCK",
    "MAX_BLOCKS",
    "MULTI_TENSOR_BLOCK",
    "TABLE_CAPACITY",
    "ByValue",
    "Launch",
    "accumulate_kernel_name",
    "adam_dtype",
    "build_tables",
    "forced_grid",
    "forced_shape",
    "grid_stride_shape",
    "multi_accumulate_launches",
    "multi_accumulate_tables",
    "plan_accumulate",
    "plan_adam",
    "plan_l2_norm",
    "plan_multi_accumulate",
    "plan_multi_adam",
    "plan_multi_sgd",
    "plan_multi_stochastic",
    "plan_sgd",
    "plan_stochastic",
    "planning_settings",
    "sgd_dtype",
    "table_dtype",
    "table_limits",
]

CHUNK_SIZE = 65536  # elements per multi-tensor block (MTA_CHUNK_SIZE)
MULTI_TENSOR_BLOCK = 512  # threads per multi-tensor block (MTA_MT_BLOCK)
MAX_BLOCKS = 320  # blocks per chunk table (MTA_MT_MAX_BLOCKS)
TABLE_CAPACITY: dict[int, int] = {1: 110, 2: 64, 3: 48, 4: 36}  # tensors per table, by depth
GRID_STRIDE_BLOCK = 256
# 2048 resident threads per SM on recent GPUs: 8 blocks of 256 fill it, and
# the grid-stride loop covers whatever is left.
_BLOCKS_PER_SM = 8
_ELEMENTS_PER_THREAD = 4

AddressOf = Callable[[Array], int]


@dataclass(frozen=True)
class ByValue:
    """A C struct passed by value: a NumPy structured array of shape (1,).

    CuPy passes a size-1 NumPy array argument by value (its bytes become the
    kernel parameter); the emulator passes its bytes.
    """

    array: np.ndarray


@dataclass(frozen=True)
class Launch:
    """One kernel launch: name, grid, block, and the C arguments in order.

    Pointer arguments are arrays of the runner's kind (or None for NULL);
    scalars are NumPy scalars of the exact C type; structs are ByValue.
    ``holds``: the arrays whose addresses a chunk table carries, kept alive
    as long as the launch is.
    """

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]  # arrays (or None), NumPy scalars, ByValue: any C argument
    holds: tuple[Array, ...] = ()


@dataclass(frozen=True)
class _TestSettings:
    """What tests may force on the planner: launch shapes, and smaller chunk tables."""

    grid: int | None = None
    block: int | None = None
    max_tensors: int | None = None
    max_blocks: int | None = None


_settings = _TestSettings()


@contextmanager
def _changed(**changes: int | None) -> Iterator[None]:
    global _settings
    saved = _settings
    _settings = replace(_settings, **changes)
    try:
        yield
    finally:
        _settings = saved


def forced_shape(grid: int | None = None, block: int | None = None) -> AbstractContextManager[None]:
    """Launch with this grid and/or block (x only) inside the block, for tests.

    Grid-stride kernels take both; multi-tensor kernels take the block only
    (their grid is the number of chunks in the table).
    """
    return _changed(grid=grid, block=block)


def forced_grid() -> int | None:
    """The grid a test forced with ``forced_shape(grid=...)``, or None."""
    return _settings.grid


def planning_settings() -> Hashable:
    """The settings tests forced on the planner now, as one hashable value: a plan remembered under
    other settings must not be reused."""
    return _settings


def table_limits(max_tensors: int | None = None, max_blocks: int | None = None) -> AbstractContextManager[None]:
    """Fill chunk tables sooner than their capacity, so tests reach relaunches cheaply."""
    if (max_tensors is not None and max_tensors < 1) or (max_blocks is not None and max_blocks < 1):
        raise ValueError("table limits must be positive")
    return _changed(max_tensors=max_tensors, max_blocks=max_blocks)


@functools.cache
def table_dtype(depth: int) -> np.dtype:
    """The NumPy twin of MtaTensorTable<depth> (C layout via align=True)."""
    t = TABLE_CAPACITY[depth]
    return np.dtype(
        [
            ("addresses", np.uint64, (depth, t)),
            ("sizes", np.int64, (t,)),
            ("kinds", np.uint8, (t,)),
            ("block_to_tensor", np.uint8, (MAX_BLOCKS,)),
            ("block_to_chunk", np.int32, (MAX_BLOCKS,)),
        ],
        align=True,
    )


def _scalar_struct_dtype(scalars: type, dtype: np.dtype) -> np.dtype:
    # a float field is a T in the C struct, a bool field an int (accum_math.cuh)
    return np.dtype([(f.name, np.int32 if f.type in (bool, "bool") else dtype) for f in fields(scalars)], align=True)


@functools.cache
def sgd_dtype(dtype: np.dtype) -> np.dtype:
    """The NumPy twin of MtaSgdScalars<T>."""
    return _scalar_struct_dtype(SgdScalars, np.dtype(dtype))


@functools.cache
def adam_dtype(dtype: np.dtype) -> np.dtype:
    """The NumPy twin of MtaAdamScalars<T>."""
    return _scalar_struct_dtype(AdamScalars, np.dtype(dtype))


def _struct(dtype: np.dtype, values: SgdScalars | AdamScalars) -> ByValue:
    # assigning a Python float to a float32 field rounds it once, as the
    # native module's static_cast<float>(double) and the reference's np.float32 do
    arr = np.zeros(1, dtype)
    for f in fields(values):
        arr[f.name] = getattr(values, f.name)
    return ByValue(arr)


def grid_stride_shape(n: int, sm_count: int) -> tuple[int, int]:
    """(grid, block) of a grid-stride kernel over n elements: enough blocks to fill the GPU."""
    block = _settings.block or GRID_STRIDE_BLOCK
    if _settings.grid is not None:
        return _settings.grid, block
    wanted = -(-n // (block * _ELEMENTS_PER_THREAD))
    return max(1, min(wanted, sm_count * _BLOCKS_PER_SM)), block


def _multi_tensor_block() -> int:
    return _settings.block or MULTI_TENSOR_BLOCK


TableEntry = tuple[Sequence[int], int, int]  # (addresses per row, size, kind)


def build_tables(depth: int, entries: Sequence[TableEntry]) -> list[tuple[np.ndarray, int]]:
    """Chunk tables covering every non-empty entry: [(table of shape (1,), blocks used)].

    Memoized: accumulating into the same buffers every micro-batch reuses the
    tables (they depend only on addresses, sizes and kinds, and are never
    written after they are built).
    """
    max_tensors = min(TABLE_CAPACITY[depth], _settings.max_tensors or TABLE_CAPACITY[depth])
    max_blocks = min(MAX_BLOCKS, _settings.max_blocks or MAX_BLOCKS)
    key = tuple((tuple(int(a) for a in addresses), int(size), int(kind)) for addresses, size, kind in entries)
    return list(_build_tables(depth, key, max_tensors, max_blocks))


@functools.lru_cache(maxsize=256)
def _build_tables(
    depth: int, entries: tuple[TableEntry, ...], max_tensors: int, max_blocks: int
) -> tuple[tuple[np.ndarray, int], ...]:
    dtype = table_dtype(depth)

    def place(table: np.ndarray, slot: int, entry: TableEntry) -> None:
        addresses, size, kind = entry
        table["addresses"][0, :, slot] = addresses
        table["sizes"][0, slot] = size
        table["kinds"][0, slot] = kind

    tables: list[tuple[np.ndarray, int]] = []
    table = np.zeros(1, dtype)
    slot = 0
    blocks = 0
    for entry in entries:
        size = entry[1]
        if size == 0:
            continue
        place(table, slot, entry)
        n_chunks = -(-size // CHUNK_SIZE)
        chunk = 0
        while chunk < n_chunks:
            take = min(n_chunks - chunk, max_blocks - blocks)
            table["block_to_tensor"][0, blocks : blocks + take] = slot
            table["block_to_chunk"][0, blocks : blocks + take] = np.arange(chunk, chunk + take)
            blocks += take
            chunk += take
            if blocks == max_blocks or (slot + 1 == max_tensors and chunk == n_chunks):
                tables.append((table, blocks))
                table = np.zeros(1, dtype)
                blocks = 0
                if chunk < n_chunks:  # the tensor goes on in the next table
                    slot = 0
                    place(table, slot, entry)
                else:
                    slot = -1
        slot += 1
    if blocks:
        tables.append((table, blocks))
    for table, _ in tables:
        table.flags.writeable = False
    return tuple(tables)


def _table_launches(
    kernel: str, depth: int, entries: Sequence[TableEntry], tail: tuple[Any, ...], holds: tuple[Array, ...]
) -> list[Launch]:
    return _launches_over(kernel, build_tables(depth, entries), tail, holds)


def _launches_over(
    kernel: str, tables: Sequence[tuple[np.ndarray, int]], tail: tuple[Any, ...], holds: tuple[Array, ...]
) -> list[Launch]:
    """One launch per chunk table, the table by value first, then ``tail``."""
    block = _multi_tensor_block()
    return [Launch(kernel, (blocks, 1, 1), (block, 1, 1), (ByValue(table), *tail), holds) for table, blocks in tables]


def _address(address_of: AddressOf, x: Array | None) -> int:
    return 0 if x is None else address_of(x)


# ------------------------------------------------------------- accumulation


def accumulate_kernel_name(mode: int, acc_dtype: np.dtype, g_dtype: np.dtype) -> str:
    """mta_add_scale_f32_f32, mta_cast_add_scale_f32_bf16, mta_copy_scale_f64_f32, ..."""
    stem = accumulate_kernel(mode, listed=False, cast=g_dtype in LOW_PRECISION).name
    return f"mta_{stem}_{SHORT_NAMES[acc_dtype]}_{SHORT_NAMES[g_dtype]}"


def _grid_stride_launch(
    name: str, arrays: tuple[Array, ...], tail: tuple[Any, ...], sm_count: int
) -> list[Launch]:
    """One grid-stride launch over arrays[0].size elements: (*arrays, n, *tail); none when empty."""
    n = int(arrays[0].size)
    if n == 0:
        return []
    grid, block = grid_stride_shape(n, sm_count)
    return [Launch(name, (grid, 1, 1), (block, 1, 1), (*arrays, np.uint64(n), *tail))]


def plan_accumulate(
    mode: int, acc: Array, comp: Array | None, g: Array, scale: float, flag: Array | None, sm_count: int
) -> list[Launch]:
    arrays = (acc, comp, g) if modes.is_compensated(mode) else (acc, g)
    name = accumulate_kernel_name(mode, acc.dtype, g.dtype)
    # a bfloat16 accumulator is summed in float32: its scale is a float
    scale_value = np.float32(scale) if (acc.dtype, g.dtype) in BFLOAT16_KINDS else acc.dtype.type(scale)
    return _grid_stride_launch(name, arrays, (scale_value, flag), sm_count)


def plan_stochastic(
    mode: int, acc: Array, g: Array, scale: float, stream: tuple[int, int, int, int], flag: Array | None,
    sm_count: int,
) -> list[Launch]:
    """A stochastic kernel over one bfloat16 acc; ``stream``: (seed, window, micro_batch, offset)."""
    seed, window, micro_batch, offset = stream
    name = accumulate_kernel_name(mode, acc.dtype, g.dtype)
    tail = (np.float32(scale), np.uint64(seed), np.uint32(window), np.uint32(micro_batch), np.uint64(offset), flag)
    return _grid_stride_launch(name, (acc, g), tail, sm_count)


def plan_multi_stochastic(
    mode: int, items: Sequence[tuple[Array, Array | None, Array]], firsts: Sequence[int], scale: float,
    key: tuple[int, int, int], flag: Array | None, address_of: AddressOf,
) -> list[Launch]:
    """Chunk-table launches over (acc, None, g) items: a depth-3 table whose row 1 holds each
    tensor's first stream index (not an address); ``key``: (seed, window, micro_batch)."""
    entries: list[TableEntry] = [
        ([address_of(acc), int(first), address_of(g)], int(acc.size), BFLOAT16_KINDS[(acc.dtype, g.dtype)])
        for (acc, _, g), first in zip(items, firsts, strict=True)
    ]
    seed, window, micro_batch = key
    tail = (np.float32(scale), np.uint64(seed), np.uint32(window), np.uint32(micro_batch), flag)
    name = f"mta_{accumulate_kernel(mode, listed=True).name}"
    return _table_launches(name, 3, entries, tail, tuple(items))


def plan_multi_accumulate(
    mode: int, items: Sequence[tuple[Array, Array | None, Array]], scale: float, flag: Array | None,
    address_of: AddressOf,
) -> list[Launch]:
    """Chunk-table launches over (acc, comp, g) items (comp None unless compensated)."""
    return multi_accumulate_launches(mode, multi_accumulate_tables(mode, items, address_of), scale, flag, items)


def multi_accumulate_tables(
    mode: int, items: Sequence[tuple[Array, Array | None, Array]], address_of: AddressOf
) -> list[tuple[np.ndarray, int]]:
    """The chunk tables of a multi-tensor accumulation: what depends on the arrays alone."""
    compensated = modes.is_compensated(mode)
    entries: list[TableEntry] = []
    for acc, comp, g in items:
        rows = [address_of(acc), address_of(comp), address_of(g)] if compensated else [address_of(acc), address_of(g)]
        kinds = ACCUMULATE_KINDS if (acc.dtype, g.dtype) in ACCUMULATE_KINDS else BFLOAT16_KINDS
        entries.append((rows, int(acc.size), kinds[(acc.dtype, g.dtype)]))
    return build_tables(3 if compensated else 2, entries)


def multi_accumulate_launches(
    mode: int, tables: Sequence[tuple[np.ndarray, int]], scale: float, flag: Array | None,
    items: Sequence[tuple[Array | None, ...]],
) -> list[Launch]:
    """One launch per chunk table; ``items`` (the arrays the tables point into) travel with each."""
    tail = (np.float32(scale), np.float64(scale), flag)
    return _launches_over(f"mta_{accumulate_kernel(mode, listed=True).name}", tables, tail, tuple(items))


# ------------------------------------------------------------------ L2 norm


def plan_l2_norm(
    tensors: Sequence[Array], scale: float, address_of: AddressOf, empty_f64: Callable[[int], Array]
) -> tuple[list[Launch], Array | None]:
    """Launches of both passes and the device array of shape (2,) that receives the sum of
    (scale * x)^2 and the max |scale * x| over every element.

    Returns ([], None) when there is nothing to sum.
    """
    entries: list[TableEntry] = [((address_of(x),), int(x.size), NORM_DTYPES[x.dtype]) for x in tensors]
    tables = build_tables(1, entries)
    total = sum(blocks for _, blocks in tables)
    if total == 0:
        return [], None
    sums, maxima, out = empty_f64(total), empty_f64(total), empty_f64(2)
    block = _multi_tensor_block()
    holds = tuple(tensors)
    launches = []
    offset = 0
    for table, blocks in tables:
        args = (ByValue(table), np.float64(scale), sums[offset:], maxima[offset:])
        launches.append(Launch("mta_multi_l2_norm_partials", (blocks, 1, 1), (block, 1, 1), args, holds))
        offset += blocks
    launches.append(Launch("mta_l2_norm_finalize", (1, 1, 1), (block, 1, 1), (sums, maxima, np.uint64(total), out)))
    return launches, out


# --------------------------------------------------------- optimizer steps


def plan_sgd(param: Array, grad: Array, buf: Array | None, h: SgdScalars, sm_count: int) -> list[Launch]:
    name = f"mta_sgd_momentum_step_{SHORT_NAMES[param.dtype]}"
    arrays = (param, grad, buf if h.momentum != 0 else None)
    return _grid_stride_launch(name, arrays, (_struct(sgd_dtype(param.dtype), h),), sm_count)


def plan_adam(
    param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, h: AdamScalars, sm_count: int
) -> list[Launch]:
    name = f"mta_adamw_step_{SHORT_NAMES[param.dtype]}"
    return _grid_stride_launch(
        name, (param, grad, exp_avg, exp_avg_sq), (_struct(adam_dtype(param.dtype), h),), sm_count
    )


def _plan_multi_step(
    stem: str,
    depth: int,
    items: Sequence[Sequence[Array]],
    struct: Callable[[np.dtype], ByValue],
    address_of: AddressOf,
) -> list[Launch]:
    """One kernel per parameter dtype present (the scalars struct is typed); a None array is NULL."""
    launches: list[Launch] = []
    for dtype in (FLOAT32, FLOAT64):
        entries: list[TableEntry] = [
            (tuple(_address(address_of, x) for x in item), int(item[0].size), NORM_DTYPES[dtype])
            for item in items
            if item[0].dtype == dtype
        ]
        if entries:
            name = f"mta_multi_{stem}_{SHORT_NAMES[dtype]}"
            launches += _table_launches(name, depth, entries, (struct(dtype),), tuple(items))
    return launches


def plan_multi_sgd(items: Sequence[Sequence[Array]], h: SgdScalars, address_of: AddressOf) -> list[Launch]:
    """Chunk-table launches over (param, grad, momentum_buf) items; buf unused (NULL) without momentum."""
    if h.momentum == 0:
        items = [(p, g, None) for p, g, _ in items]
    return _plan_multi_step("sgd_momentum_step", 3, items, lambda d: _struct(sgd_dtype(d), h), address_of)


def plan_multi_adam(items: Sequence[Sequence[Array]], h: AdamScalars, address_of: AddressOf) -> list[Launch]:
    """Chunk-table launches over (param, grad, exp_avg, exp_avg_sq) items."""
    return _plan_multi_step("adamw_step", 4, items, lambda d: _struct(adam_dtype(d), h), address_of)

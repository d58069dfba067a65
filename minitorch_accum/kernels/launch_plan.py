"""Launch planning shared by the CuPy path and the CPU launch emulator.

Everything about *how* a CUDA kernel is launched lives here: kernel names,
argument lists with their exact C types, grid and block sizes, the
multi-tensor chunk tables (and launching again when a table fills), the
structs passed by value. Both runners (cuda_module.py, emulator.py) execute
the same plans, so the emulator tests exercise this code too.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from minitorch_accum.kernels import modes
from minitorch_accum.kernels.dtypes import (
    ACCUMULATE_KINDS,
    FLOAT32,
    FLOAT64,
    LOW_PRECISION,
    NORM_DTYPES,
    SHORT_NAMES,
)
from minitorch_accum.kernels.hyperparameters import AdamScalars, SgdScalars

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
    "forced_shape",
    "grid_stride_shape",
    "plan_accumulate",
    "plan_adam",
    "plan_l2_norm",
    "plan_multi_accumulate",
    "plan_multi_adam",
    "plan_multi_sgd",
    "plan_sgd",
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

AddressOf = Callable[[Any], int]


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
    """

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Any, ...]


_forced_grid: int | None = None
_forced_block: int | None = None
_limit_tensors: int | None = None
_limit_blocks: int | None = None


@contextmanager
def forced_shape(grid: int | None = None, block: int | None = None) -> Iterator[None]:
    """Launch with this grid and/or block (x only) inside the block, for tests.

    Grid-stride kernels take both; multi-tensor kernels take the block only
    (their grid is the number of chunks in the table).
    """
    global _forced_grid, _forced_block
    saved = (_forced_grid, _forced_block)
    _forced_grid, _forced_block = grid, block
    try:
        yield
    finally:
        _forced_grid, _forced_block = saved


@contextmanager
def table_limits(max_tensors: int | None = None, max_blocks: int | None = None) -> Iterator[None]:
    """Fill chunk tables sooner than their capacity, so tests reach relaunches cheaply."""
    global _limit_tensors, _limit_blocks
    if (max_tensors is not None and max_tensors < 1) or (max_blocks is not None and max_blocks < 1):
        raise ValueError("table limits must be positive")
    saved = (_limit_tensors, _limit_blocks)
    _limit_tensors, _limit_blocks = max_tensors, max_blocks
    try:
        yield
    finally:
        _limit_tensors, _limit_blocks = saved


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


def _scalar_struct_dtype(names: Sequence[str], int_names: Sequence[str], dtype: np.dtype) -> np.dtype:
    return np.dtype([(n, dtype) for n in names] + [(n, np.int32) for n in int_names], align=True)


@functools.cache
def sgd_dtype(dtype: np.dtype) -> np.dtype:
    """The NumPy twin of MtaSgdScalars<T>."""
    names = [f.name for f in fields(SgdScalars)]
    return _scalar_struct_dtype(names[:5], names[5:], np.dtype(dtype))


@functools.cache
def adam_dtype(dtype: np.dtype) -> np.dtype:
    """The NumPy twin of MtaAdamScalars<T>."""
    names = [f.name for f in fields(AdamScalars)]
    return _scalar_struct_dtype(names[:10], names[10:], np.dtype(dtype))


def _struct(dtype: np.dtype, values: Any) -> ByValue:
    # assigning a Python float to a float32 field rounds it once, as the
    # native module's static_cast<float>(double) and the reference's np.float32 do
    arr = np.zeros(1, dtype)
    for f in fields(values):
        arr[f.name] = getattr(values, f.name)
    return ByValue(arr)


def grid_stride_shape(n: int, sm_count: int) -> tuple[int, int]:
    """(grid, block) of a grid-stride kernel over n elements: enough blocks to fill the GPU."""
    block = _forced_block or GRID_STRIDE_BLOCK
    if _forced_grid is not None:
        return _forced_grid, block
    wanted = -(-n // (block * _ELEMENTS_PER_THREAD))
    return max(1, min(wanted, sm_count * _BLOCKS_PER_SM)), block


def _multi_tensor_block() -> int:
    return _forced_block or MULTI_TENSOR_BLOCK


TableEntry = tuple[Sequence[int], int, int]  # (addresses per row, size, kind)


def build_tables(depth: int, entries: Sequence[TableEntry]) -> list[tuple[np.ndarray, int]]:
    """Chunk tables covering every non-empty entry: [(table of shape (1,), blocks used)].

    Memoized: accumulating into the same buffers every micro-batch reuses the
    tables (they depend only on addresses, sizes and kinds, and are never
    written after they are built).
    """
    max_tensors = min(TABLE_CAPACITY[depth], _limit_tensors or TABLE_CAPACITY[depth])
    max_blocks = min(MAX_BLOCKS, _limit_blocks or MAX_BLOCKS)
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


def _table_launches(kernel: str, depth: int, entries: Sequence[TableEntry], tail: tuple[Any, ...]) -> list[Launch]:
    block = _multi_tensor_block()
    return [
        Launch(kernel, (blocks, 1, 1), (block, 1, 1), (ByValue(table), *tail))
        for table, blocks in build_tables(depth, entries)
    ]


def _address(address_of: AddressOf, x: Any) -> int:
    return 0 if x is None else address_of(x)


# ------------------------------------------------------------- accumulation


def accumulate_kernel_name(mode: int, acc_dtype: np.dtype, g_dtype: np.dtype) -> str:
    """mta_add_scale_f32_f32, mta_cast_add_scale_f32_bf16, mta_copy_scale_f64_f32, ..."""
    stem = "cast_add_scale" if mode == modes.ADD and g_dtype in LOW_PRECISION else modes.KERNEL_NAMES[mode]
    return f"mta_{stem}_{SHORT_NAMES[acc_dtype]}_{SHORT_NAMES[g_dtype]}"


def plan_accumulate(mode: int, acc: Any, comp: Any, g: Any, scale: float, flag: Any, sm_count: int) -> list[Launch]:
    n = int(acc.size)
    if n == 0:
        return []
    grid, block = grid_stride_shape(n, sm_count)
    s = acc.dtype.type(scale)
    if modes.is_compensated(mode):
        args: tuple[Any, ...] = (acc, comp, g, np.uint64(n), s, flag)
    else:
        args = (acc, g, np.uint64(n), s, flag)
    name = accumulate_kernel_name(mode, acc.dtype, g.dtype)
    return [Launch(name, (grid, 1, 1), (block, 1, 1), args)]


def plan_multi_accumulate(
    mode: int,
    accs: Sequence[Any],
    comps: Sequence[Any] | None,
    gs: Sequence[Any],
    scale: float,
    flag: Any,
    address_of: AddressOf,
) -> list[Launch]:
    compensated = modes.is_compensated(mode)
    entries: list[TableEntry] = []
    for i, (acc, g) in enumerate(zip(accs, gs, strict=True)):
        rows = [address_of(acc)]
        if compensated:
            assert comps is not None
            rows.append(address_of(comps[i]))
        rows.append(address_of(g))
        entries.append((rows, int(acc.size), ACCUMULATE_KINDS[(acc.dtype, g.dtype)]))
    tail = (np.float32(scale), np.float64(scale), flag)
    return _table_launches(f"mta_multi_{modes.KERNEL_NAMES[mode]}", 3 if compensated else 2, entries, tail)


# ------------------------------------------------------------------ L2 norm


def plan_l2_norm(
    tensors: Sequence[Any], address_of: AddressOf, empty_f64: Callable[[int], Any]
) -> tuple[list[Launch], Any]:
    """Launches of both passes and the device array of shape (1,) that receives the sum of squares.

    Returns ([], None) when there is nothing to sum.
    """
    entries: list[TableEntry] = [((address_of(x),), int(x.size), NORM_DTYPES[x.dtype]) for x in tensors]
    tables = build_tables(1, entries)
    total = sum(blocks for _, blocks in tables)
    if total == 0:
        return [], None
    partials = empty_f64(total)
    out = empty_f64(1)
    block = _multi_tensor_block()
    launches = []
    offset = 0
    for table, blocks in tables:
        launches.append(
            Launch("mta_multi_l2_norm_partials", (blocks, 1, 1), (block, 1, 1), (ByValue(table), partials[offset:]))
        )
        offset += blocks
    launches.append(Launch("mta_l2_norm_finalize", (1, 1, 1), (block, 1, 1), (partials, np.uint64(total), out)))
    return launches, out


# --------------------------------------------------------- optimizer steps


def plan_sgd(param: Any, grad: Any, buf: Any, h: SgdScalars, sm_count: int) -> list[Launch]:
    n = int(param.size)
    if n == 0:
        return []
    grid, block = grid_stride_shape(n, sm_count)
    name = f"mta_sgd_momentum_step_{SHORT_NAMES[param.dtype]}"
    args = (param, grad, buf if h.momentum != 0 else None, np.uint64(n), _struct(sgd_dtype(param.dtype), h))
    return [Launch(name, (grid, 1, 1), (block, 1, 1), args)]


def plan_adam(param: Any, grad: Any, exp_avg: Any, exp_avg_sq: Any, h: AdamScalars, sm_count: int) -> list[Launch]:
    n = int(param.size)
    if n == 0:
        return []
    grid, block = grid_stride_shape(n, sm_count)
    name = f"mta_adamw_step_{SHORT_NAMES[param.dtype]}"
    args = (param, grad, exp_avg, exp_avg_sq, np.uint64(n), _struct(adam_dtype(param.dtype), h))
    return [Launch(name, (grid, 1, 1), (block, 1, 1), args)]


def plan_multi_sgd(
    params: Sequence[Any], grads: Sequence[Any], bufs: Sequence[Any] | None, h: SgdScalars, address_of: AddressOf
) -> list[Launch]:
    """One kernel per parameter dtype present (the scalars struct is typed)."""
    launches: list[Launch] = []
    for dtype in (FLOAT32, FLOAT64):
        entries: list[TableEntry] = []
        for i, (p, g) in enumerate(zip(params, grads, strict=True)):
            if p.dtype != dtype:
                continue
            b = bufs[i] if bufs is not None and h.momentum != 0 else None
            entries.append(((address_of(p), address_of(g), _address(address_of, b)), int(p.size), NORM_DTYPES[dtype]))
        if entries:
            name = f"mta_multi_sgd_momentum_step_{SHORT_NAMES[dtype]}"
            launches += _table_launches(name, 3, entries, (_struct(sgd_dtype(dtype), h),))
    return launches


def plan_multi_adam(
    params: Sequence[Any],
    grads: Sequence[Any],
    exp_avgs: Sequence[Any],
    exp_avg_sqs: Sequence[Any],
    h: AdamScalars,
    address_of: AddressOf,
) -> list[Launch]:
    launches: list[Launch] = []
    for dtype in (FLOAT32, FLOAT64):
        entries: list[TableEntry] = [
            ((address_of(p), address_of(g), address_of(m), address_of(v)), int(p.size), NORM_DTYPES[dtype])
            for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs, strict=True)
            if p.dtype == dtype
        ]
        if entries:
            name = f"mta_multi_adamw_step_{SHORT_NAMES[dtype]}"
            launches += _table_launches(name, 4, entries, (_struct(adam_dtype(dtype), h),))
    return launches

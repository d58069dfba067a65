"""Launch planning of the fused layer kernels (csrc/gelu.cu, layer_norm.cu, cross_entropy.cu,
embedding.cu, softmax.cu), shared by the CuPy path and the CPU launch emulator.

Elementwise kernels are grid-stride launches of 256-thread blocks (``grid_stride_shape``).
Row kernels (LayerNorm, the cross-entropy forward, softmax) take blocks of 32 x 8 threads: 32 lanes
per row, 8 rows per block; their grid covers the rows (up to 8 blocks per SM) and strides
over the rest. ``forced_shape(grid=...)`` forces the grid of either kind; a row kernel's
block is fixed (its shared arrays are sized for it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.dtypes import SHORT_NAMES
from minitorch_accum.kernels.launch.plan import Launch, forced_grid, grid_stride_shape

__all__ = [
    "COLUMN_CHUNK",
    "ROW_BLOCK",
    "plan_cross_entropy_backward",
    "plan_cross_entropy_forward",
    "plan_embedding_backward",
    "plan_gelu",
    "plan_layer_norm_backward",
    "plan_layer_norm_forward",
    "plan_softmax_backward",
    "plan_softmax_forward",
]

ROW_BLOCK = (32, 8, 1)  # (MTA_ROW_LANES, MTA_ROWS_PER_BLOCK)
COLUMN_CHUNK = 64  # MTA_COLUMN_CHUNK
_BLOCKS_PER_SM = 8


def _row_grid(rows: int, sm_count: int) -> tuple[int, int, int]:
    forced = forced_grid()
    grid = forced if forced is not None else max(1, min(-(-rows // ROW_BLOCK[1]), sm_count * _BLOCKS_PER_SM))
    return (grid, 1, 1)


def _elementwise(name: str, n: int, args: tuple[Any, ...], sm_count: int) -> list[Launch]:
    if n == 0:
        return []
    grid, block = grid_stride_shape(n, sm_count)
    return [Launch(name, (grid, 1, 1), (block, 1, 1), args)]


def _suffix(x: Array) -> str:
    return SHORT_NAMES[np.dtype(x.dtype)]


def plan_gelu(x: Array, grad: Array, out: Array, tanh: bool, sm_count: int) -> list[Launch]:
    """gelu_forward (grad None) or gelu_backward over x.size elements."""
    n = np.uint64(x.size)
    flag = np.int32(1 if tanh else 0)
    if grad is None:
        return _elementwise(f"mta_gelu_forward_{_suffix(x)}", x.size, (x, out, n, flag), sm_count)
    return _elementwise(f"mta_gelu_backward_{_suffix(x)}", x.size, (x, grad, out, n, flag), sm_count)


def plan_layer_norm_forward(x: Array, weight: Array, bias: Array, eps: float, out: Array, mean: Array, rstd: Array,
                            sm_count: int) -> list[Launch]:
    rows, cols = x.shape
    if rows == 0:
        return []
    args = (x, weight, bias, out, mean, rstd, np.uint64(rows), np.uint64(cols), np.float64(eps))
    return [Launch(f"mta_layer_norm_forward_{_suffix(x)}", _row_grid(rows, sm_count), ROW_BLOCK, args)]


def plan_layer_norm_backward(x: Array, weight: Array, mean: Array, rstd: Array, grad: Array, grad_x: Array,
                             grad_weight: Array, grad_bias: Array, sm_count: int,
                             empty_f64: Callable[[int], Array]) -> list[Launch]:
    """The input gradient (a row kernel), then the chunks' partial column sums and their
    totals for the weight and bias gradients that are wanted."""
    rows, cols = x.shape
    s = _suffix(x)
    launches: list[Launch] = []
    if grad_x is not None and rows:
        args = (x, weight, mean, rstd, grad, grad_x, np.uint64(rows), np.uint64(cols))
        launches.append(Launch(f"mta_layer_norm_input_grad_{s}", _row_grid(rows, sm_count), ROW_BLOCK, args))
    # the partial sums are in x's dtype: a float64 buffer viewed as it (twice as many float32 slots)
    wanted = [(out, empty_f64(max(1, -(-rows // COLUMN_CHUNK) * cols)).view(x.dtype))
              for out in (grad_weight, grad_bias) if out is not None]
    if not wanted or cols == 0:
        return launches
    chunks = -(-rows // COLUMN_CHUNK)
    partial_w = wanted[0][1] if grad_weight is not None else None
    partial_b = wanted[-1][1] if grad_bias is not None else None
    launches += _elementwise(f"mta_layer_norm_column_partials_{s}", chunks * cols,
                             (x, mean, rstd, grad, partial_w, partial_b, np.uint64(rows), np.uint64(cols)), sm_count)
    for out, partials in wanted:
        launches += _elementwise(f"mta_layer_norm_column_finish_{s}", cols,
                                 (partials, out, np.uint64(chunks), np.uint64(cols)), sm_count)
    return launches


def plan_cross_entropy_forward(logits: Array, targets: Array, ignore_index: int, losses: Array, lse: Array,
                               sm_count: int) -> list[Launch]:
    rows, classes = logits.shape
    if rows == 0:
        return []
    args = (logits, targets, np.int64(ignore_index), losses, lse, np.uint64(rows), np.uint64(classes))
    return [Launch(f"mta_cross_entropy_forward_{_suffix(logits)}", _row_grid(rows, sm_count), ROW_BLOCK, args)]


def plan_cross_entropy_backward(logits: Array, targets: Array, ignore_index: int, lse: Array, grad: Array, out: Array,
                                sm_count: int) -> list[Launch]:
    rows, classes = logits.shape
    args = (logits, targets, np.int64(ignore_index), lse, grad, out, np.uint64(rows), np.uint64(classes))
    return _elementwise(f"mta_cross_entropy_backward_{_suffix(logits)}", rows * classes, args, sm_count)


def plan_embedding_backward(order: Array, offsets: Array, grad: Array, out: Array, sm_count: int) -> list[Launch]:
    """``order``: the ids' positions sorted stably by id; ``offsets``: row v's ids are
    order[offsets[v]:offsets[v + 1]] (both int64)."""
    rows, dim = out.shape
    args = (order, offsets, grad, out, np.uint64(rows), np.uint64(dim))
    return _elementwise(f"mta_embedding_backward_{_suffix(out)}", rows * dim, args, sm_count)


def plan_softmax_forward(x: Array, bias: Array | None, scale: float, out: Array, sm_count: int) -> list[Launch]:
    rows, cols = x.shape
    if rows == 0 or cols == 0:
        return []
    bias_rows = 1 if bias is None else bias.shape[0]
    args = (x, bias, out, np.uint64(rows), np.uint64(cols), np.uint64(bias_rows), np.float64(scale))
    return [Launch(f"mta_softmax_forward_{_suffix(x)}", _row_grid(rows, sm_count), ROW_BLOCK, args)]


def plan_softmax_backward(probs: Array, grad: Array, scale: float, out: Array, sm_count: int) -> list[Launch]:
    rows, cols = probs.shape
    if rows == 0 or cols == 0:
        return []
    args = (probs, grad, out, np.uint64(rows), np.uint64(cols), np.float64(scale))
    return [Launch(f"mta_softmax_backward_{_suffix(probs)}", _row_grid(rows, sm_count), ROW_BLOCK, args)]

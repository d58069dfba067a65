"""The roofline of a micro-batch: how many floating-point operations the model needs, how fast
the machine's GEMM runs on the model's own shapes, and which share of that limit a side reaches.

A transformer's micro-batch is GEMMs with a little around them, so the limit is the GEMM's
rate on the model's shapes (not the CPU's peak): ``gemm_shapes`` lists every forward GEMM
(M x K @ K x N) and the two of its backward (dX = dY W^T, dW = X^T dY); ``gemm_rate`` times
them with a given matmul (ours: the backend's, whose float32 products are the native GEMM; NumPy's
OpenBLAS beside it; or PyTorch's) and returns
their FLOPs over their seconds. ``micro_batch_flops`` counts the model's FLOPs: those GEMMs
(3x the forward's) plus the attention's two batched products each way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.end_to_end.cases import ModelCase, ModelSpec, TransformerCase

__all__ = ["gemm_rate", "gemm_shapes", "micro_batch_flops"]

Shape = tuple[int, int, int]  # (M, K, N): an (M, K) @ (K, N) product


def _forward_gemms(case: ModelCase, b: int) -> list[Shape]:
    if isinstance(case, ModelSpec):
        return [(b, fan_in, fan_out) for fan_in, fan_out in zip(case.dims, case.dims[1:], strict=False)]
    if isinstance(case, TransformerCase):
        tokens, e = b * case.block_size, case.n_embd
        per_layer = [(tokens, e, 3 * e), (tokens, e, e), (tokens, e, 4 * e), (tokens, 4 * e, e)]
        return per_layer * case.n_layer + [(tokens, e, case.config().vocab_size)]
    raise TypeError(f"no GEMM shapes for {type(case).__name__}")


def gemm_shapes(case: ModelCase, b: int) -> list[Shape]:
    """Every GEMM of a micro-batch of ``b`` rows: each forward (M, K, N), then its backward's
    dX (M, N) @ (N, K) and dW (K, M) @ (M, N)."""
    shapes: list[Shape] = []
    for m, k, n in _forward_gemms(case, b):
        shapes += [(m, k, n), (m, n, k), (k, m, n)]
    return shapes


def _attention_flops(case: ModelCase, b: int) -> int:
    """QK^T and PV forward, and the four products of their backward: 3 x 2 x 2 L S E per
    sequence and layer (the causal half is computed too, as both libraries do here)."""
    if not isinstance(case, TransformerCase):
        return 0
    length = case.block_size
    return 3 * 2 * 2 * b * case.n_layer * length * length * case.n_embd


def micro_batch_flops(case: ModelCase, b: int) -> dict[str, int]:
    """FLOPs of one micro-batch (forward and backward): ``gemm`` (2 M K N each), ``attention``,
    and their ``total`` (elementwise work, a few FLOPs per activation, is left out)."""
    gemm = sum(2 * m * k * n for m, k, n in gemm_shapes(case, b))
    attention = _attention_flops(case, b)
    return {"gemm": gemm, "attention": attention, "total": gemm + attention}


def gemm_rate(shapes: list[Shape], matmul: Callable[[Any, Any], Any], make: Callable[[np.ndarray], Any],
              repeats: int = 7) -> dict[str, Any]:
    """FLOP/s of ``matmul`` over ``shapes`` (float32): each shape's median of ``repeats`` calls,
    summed; ``make`` turns a NumPy array into the library's (a tensor for PyTorch)."""
    rng = np.random.default_rng(0)
    distinct = sorted(set(shapes))
    seconds: dict[Shape, float] = {}
    for m, k, n in distinct:
        a = make(rng.standard_normal((m, k), dtype=np.float32))
        b = make(rng.standard_normal((k, n), dtype=np.float32))
        matmul(a, b)  # warm: the BLAS's threads and buffers
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            matmul(a, b)
            times.append(time.perf_counter() - start)
        seconds[(m, k, n)] = float(np.median(times))
    total_seconds = sum(seconds[s] for s in shapes)
    flops = sum(2 * m * k * n for m, k, n in shapes)
    return {"flops_per_second": flops / total_seconds, "seconds_per_micro_batch": total_seconds,
            "by_shape": [{"shape": list(s), "ms": seconds[s] * 1e3,
                          "gflops": 2 * s[0] * s[1] * s[2] / seconds[s] / 1e9} for s in distinct]}

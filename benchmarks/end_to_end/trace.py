"""Seconds inside the accumulation kernels, from ``Accumulator(trace=True)``: every kernel
except the fused GEMMs (add/copy-scale, container adds, finite check), plus what a beta = 1
GEMM costs over the beta = 0 GEMM of the same parameter (the GEMM itself replaces the plain
backward's weight-gradient GEMM, so only its extra read of the buffer is accumulation)."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.end_to_end.cases import ModelCase
from benchmarks.end_to_end.windows import MicroBatches, traced_window
from benchmarks.harness.contention import cpu_ticks, other_cpu_share
from benchmarks.harness.timing import median
from minitorch_accum.accum import Accumulator
from minitorch_accum.observe import AccumulationTrace, KernelEvent

__all__ = ["kernel_trace"]

_GEMM_KERNELS = ("gemm-beta0", "gemm-beta1", "gemm-fallback")


def kernel_trace(case: ModelCase, acc: Accumulator, micro: MicroBatches, ks: list[int], b: int,
                 windows: int) -> dict[str, Any]:
    """Per-kernel seconds per micro-batch, for each k, from ``acc`` with a trace attached.

    The accumulator of the timed runs is reused (its arena is already paged in); the
    trace is attached only here because recording costs time of its own."""
    acc.trace = AccumulationTrace()
    out: dict[str, Any] = {}
    try:
        for k in ks:
            before, started = cpu_ticks(), time.perf_counter()
            for _ in range(max(1, windows)):
                traced_window(case, acc, micro[:k], b)
            out[str(k)] = _summarize(acc.trace.events, max(1, windows) * k)
            out[str(k)]["other_processes_cpu_share"] = other_cpu_share(before, started)
            acc.trace.clear()
    finally:
        acc.trace = None
    return out


def _summarize(events: list[KernelEvent], micro_batches: int) -> dict[str, Any]:
    kernels: dict[str, dict[str, float]] = {}
    for e in events:
        row = kernels.setdefault(e.kernel, {"calls": 0, "seconds": 0.0, "bytes": 0})
        row["calls"] += 1
        row["seconds"] += e.seconds
        row["bytes"] += e.bytes
    per_kernel = {
        name: {
            "calls_per_micro_batch": row["calls"] / micro_batches,
            "seconds_per_micro_batch": row["seconds"] / micro_batches,
            "bytes_per_micro_batch": row["bytes"] / micro_batches,
            "gb_per_second": row["bytes"] / row["seconds"] / 1e9 if row["seconds"] > 0 else None,
        }
        for name, row in sorted(kernels.items())
    }
    accumulation = sum(r["seconds"] for n, r in kernels.items() if n not in _GEMM_KERNELS) / micro_batches
    gemm = sum(r["seconds"] for n, r in kernels.items() if n in _GEMM_KERNELS) / micro_batches
    # beta = 1 re-reads the buffer the plain backward would not; the rest of the GEMM is the
    # weight gradient the plain backward computes anyway. Compare per parameter, since the
    # GEMMs of different layers differ by orders of magnitude.
    by_param: dict[str, dict[str, list[float]]] = {}
    for e in events:
        if e.kernel in ("gemm-beta0", "gemm-beta1"):
            by_param.setdefault(e.param, {"gemm-beta0": [], "gemm-beta1": []})[e.kernel].append(e.seconds)
    beta1_extra = 0.0
    for times in by_param.values():
        if times["gemm-beta0"] and times["gemm-beta1"]:
            extra = median(times["gemm-beta1"]) - median(times["gemm-beta0"])
            beta1_extra += extra * len(times["gemm-beta1"])
    return {
        "kernels": per_kernel,
        "accumulation_seconds_per_micro_batch": accumulation,
        "gemm_seconds_per_micro_batch": gemm,
        "gemm_beta1_extra_seconds": beta1_extra / micro_batches,
    }

"""Peak activation memory of k micro-batches of b against one batch of k*b, measured by the
allocator through ``Accumulator.micro_batch()`` around forward + backward: the bytes of arrays
(NumPy's allocator on the CPU, through a counting data-memory handler; a CuPy memory hook on
a GPU), and tracemalloc's total beside them, which adds the Python objects of the graph."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

import minitorch_accum as mta
from benchmarks.end_to_end.cases import ModelCase
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator

__all__ = ["MEMORY_SLACK", "peak_memory"]

MEMORY_SLACK = 0.10  # the target: peak of k x b <= (1/k + 10%) of the peak of one batch of k*b


def peak_memory(case: ModelCase, model: nn.Module, acc: Accumulator | None, features: np.ndarray,
                labels: np.ndarray, ks: list[int], b: int, fusion: str, device: str) -> dict[str, Any]:
    """Peak bytes of each micro-batch of a k x b window and of one batch of k*b, for each k."""
    acc = acc or Accumulator(model, steps=ks[-1], fusion=fusion)
    per_row = case.items_per_row

    def rows(start: int, stop: int) -> tuple[Any, Any]:
        return mta.tensor(features[start:stop], device=device), mta.tensor(labels[start:stop], device=device)

    def probed(x: Any, y: Any, count: int) -> tuple[int, int]:
        with acc.micro_batch() as probe:
            acc.backward(case.loss(model, x, y), num_items=count * per_row)
        # without a data-memory handler (an old NumPy) the arrays cannot be told apart
        arrays = probe.array_peak_bytes if probe.array_peak_bytes is not None else probe.peak_bytes
        return arrays, probe.peak_bytes

    # one micro-batch under the probe first: first calls allocate caches once (dtype names,
    # kernel tables), which belong to no micro-batch
    acc.set_steps(1)
    probed(*rows(0, b), b)
    acc.found_nonfinite()
    acc.zero()
    out: dict[str, Any] = {}
    for k in ks:
        micro = [rows(i * b, (i + 1) * b) for i in range(k)]
        big_x, big_y = rows(0, k * b)
        acc.set_steps(k)
        # the graph frees itself by reference counting; a collection of older cyclic garbage
        # in the middle of a measurement would only lower its peak, so none may run there
        gc.collect()
        gc.disable()
        try:
            peaks = [probed(x, y, b) for x, y in micro]
            acc.found_nonfinite()
            acc.zero()
            acc.set_steps(1)
            big, big_total = probed(big_x, big_y, k * b)
            acc.found_nonfinite()
            acc.zero()
        finally:
            gc.enable()
        arrays = [a for a, _ in peaks]
        totals = [t for _, t in peaks]
        out[str(k)] = {
            "micro_batch_peak_bytes": max(arrays),
            "micro_batch_peaks": arrays,
            "full_batch_peak_bytes": big,
            "ratio": max(arrays) / big if big else None,
            "micro_batch_total_bytes": max(totals),
            "full_batch_total_bytes": big_total,
            "total_ratio": max(totals) / big_total if big_total else None,
            "ideal_ratio": 1.0 / k,
            "target_ratio": 1.0 / k + MEMORY_SLACK / k,
        }
    return out

"""Peak activation memory of k micro-batches of b against one batch of k*b, measured by the
allocator (tracemalloc on the CPU, a CuPy memory hook on a GPU) through
``Accumulator.micro_batch()`` around forward + backward."""

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

    def rows(start: int, stop: int) -> tuple[Any, Any]:
        return mta.tensor(features[start:stop], device=device), mta.tensor(labels[start:stop], device=device)

    def probed(x: Any, y: Any, items: int) -> int:
        with acc.micro_batch() as probe:
            acc.backward(case.loss(model, x, y), num_items=items)
        return probe.peak_bytes

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
            big = probed(big_x, big_y, k * b)
            acc.found_nonfinite()
            acc.zero()
        finally:
            gc.enable()
        out[str(k)] = {
            "micro_batch_peak_bytes": max(peaks),
            "micro_batch_peaks": peaks,
            "full_batch_peak_bytes": big,
            "ratio": max(peaks) / big if big else None,
            "ideal_ratio": 1.0 / k,
            "target_ratio": 1.0 / k + MEMORY_SLACK / k,
        }
    return out

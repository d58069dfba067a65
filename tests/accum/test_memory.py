"""Activation memory, measured by the allocator: k micro-batches of b cost about one
micro-batch of b, and about 1/k of one batch of k*b."""

from __future__ import annotations

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator, PeakMemory
from minitorch_accum.nn import functional as F


def test_peak_activation_memory_of_micro_batches_is_about_one_kth() -> None:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(64, 512, rng=rng), nn.ReLU(), nn.Linear(512, 512, rng=rng), nn.ReLU(),
                          nn.Linear(512, 10, rng=rng))
    k, b = 8, 32
    x = rng.normal(size=(k * b, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=k * b)
    acc = Accumulator(model, steps=k, fusion="gemm")
    for i in range(k):
        part = slice(i * b, (i + 1) * b)
        with acc.micro_batch():
            acc.backward(F.cross_entropy(model(mta.tensor(x[part])), y[part], reduction="sum"), num_items=b)
    micro_peaks = acc.activation_peaks
    acc.zero()
    big = Accumulator(model, steps=1, fusion="gemm")
    with big.micro_batch():
        big.backward(F.cross_entropy(model(mta.tensor(x)), y, reduction="sum"), num_items=k * b)
    big_peak = big.activation_peaks[-1]
    with PeakMemory("cpu") as single:
        loss = F.cross_entropy(model(mta.tensor(x[:b])), y[:b], reduction="sum")
        Accumulator(model, steps=1, fusion="gemm").backward(loss, num_items=b)
    # every micro-batch peaks like one micro-batch alone (within 30%) ...
    assert max(micro_peaks) <= 1.3 * single.peak_bytes
    # ... and at about 1/k of the big batch: 1/8 plus a margin for per-call constants
    assert max(micro_peaks) / big_peak <= 1 / k * 1.5
    report = acc.memory_report(optim.SGD(0.1))
    assert report.arena >= report.parameters > 0 and report.activations == micro_peaks[-1]

"""Neumaier-compensated accumulation keeps fp32 sums accurate over long windows."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum.kernels as K
from tests.kernels.kernel_cases import on_path


@pytest.mark.parametrize(
    ("path", "steps", "n"), [("native", 10_000, 512), ("reference", 10_000, 64), ("emulated", 10_000, 16)]
)
def test_compensated_error_far_below_naive_over_10000_accumulations(path, steps, n):
    rng = np.random.default_rng(3)
    scale = np.float32(1 / 3)  # not exact in binary: every product is rounded too
    naive = np.zeros(n, np.float32)
    acc = np.zeros(n, np.float32)
    comp = np.zeros(n, np.float32)
    exact = np.zeros(n, np.float64)
    with on_path(path):
        for _ in range(steps):
            g = rng.uniform(0.5, 1.5, n).astype(np.float32)
            K.add_scale(naive, g, scale)
            K.add_scale_compensated(acc, comp, g, scale)
            # the fp32 product is exact in fp64, and a 10,000-term fp64 sum is exact to ~1e-12
            exact += (scale * g).astype(np.float64)
    naive_error = np.abs(naive.astype(np.float64) - exact).max()
    compensated_error = np.abs(acc.astype(np.float64) + comp.astype(np.float64) - exact).max()
    assert naive_error > 0
    assert compensated_error < naive_error / 100, (compensated_error, naive_error)


@pytest.mark.parametrize("path", ["reference", "native", "emulated"])
def test_compensation_recovers_a_small_term_lost_by_a_large_one(path):
    acc = np.array([1e8, 1.0], np.float32)
    comp = np.zeros(2, np.float32)
    with on_path(path):
        for _ in range(100):
            K.add_scale_compensated(acc, comp, np.array([1.0, 1e8], np.float32), 1.0)
    total = acc.astype(np.float64) + comp
    assert total.tolist() == [1e8 + 100, 1 + 100 * 1e8]

"""Exploding but finite gradients: the norm is finite, clipping clips, and a GEMM-fused window
is not mistaken for a non-finite one (issue 11: fp32 sums of squares overflowed at 1e20)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import Gradients


@pytest.mark.parametrize(("dtype", "value"), [("float32", 1e20), ("float64", 1e200)])
def test_clip_grad_norm_clips_huge_finite_gradients(dtype: str, value: float) -> None:
    param = nn.Param(np.zeros(4, dtype=dtype))
    grads = Gradients({id(param): (param, np.full(4, value, dtype=dtype))})
    norm = optim.clip_grad_norm(grads, 1.0)
    assert norm == pytest.approx(2 * value, rel=1e-6)
    np.testing.assert_allclose(grads[param], np.full(4, 0.5), rtol=1e-5)


@pytest.mark.parametrize("fusion", ["gemm", "leaf", "none"])
def test_a_window_of_huge_finite_gradients_steps_and_is_clipped(fusion: str) -> None:
    layer = nn.Linear(3, 2, rng=np.random.default_rng(0))
    before = layer.weight.numpy().copy()
    acc = Accumulator(layer, steps=2, fusion=fusion)
    x = np.full((4, 3), 1e9, dtype=np.float32)
    for _ in range(2):
        acc.backward((layer(mta.tensor(x)) * 1e9).sum(), num_items=4)  # entries ~ 1e18 x 4 items
    assert not acc.found_nonfinite()
    norm = optim.clip_grad_norm(acc, 1.0)
    assert math.isfinite(norm) and norm > 1e18
    opt = optim.SGD(1.0)
    opt.step(layer, acc)
    assert opt.skipped_steps == 0
    step = np.linalg.norm(np.concatenate([(layer.weight.numpy() - before).ravel()]))
    assert 0.5 < step <= 1.0 + 1e-5  # the clipped gradient (norm 1) moved the weight, by at most lr * 1

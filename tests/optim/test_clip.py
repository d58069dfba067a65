"""Clipping by global norm (``optim/clip.py``): gradients within the limit stay as they are, and
what cannot be measured is named."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim


def test_gradients_within_the_limit_are_left_as_they_are() -> None:
    model = nn.Sequential(nn.Linear(3, 2, dtype="float64", rng=np.random.default_rng(0)))
    grads = mta.Gradients()
    for p in model.parameters():
        grads[p] = np.random.default_rng(1).normal(size=p.shape)
    before = {id(p): np.array(g, copy=True) for p, g in grads.items()}
    norm = optim.grad_norm(grads)
    for limit in (1.5 * norm, 1.99 * norm, norm * (1 + 1e-3)):  # not scaled up towards the limit
        assert optim.clip_grad_norm(grads, max_norm=limit) == norm
        for p, g in grads.items():
            np.testing.assert_array_equal(g, before[id(p)])


@pytest.mark.parametrize("call", [optim.grad_norm, lambda g: optim.clip_grad_norm(g, 1.0)],
                         ids=["grad_norm", "clip_grad_norm"])
def test_what_is_neither_gradients_nor_an_accumulator_is_named(call) -> None:
    with pytest.raises(TypeError, match=r"^grad_norm expects a Gradients container or an Accumulator, got dict$"):
        call({})

"""Softmax, log-softmax and the losses: gradients against finite differences, stability, spellings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import gradcheck
from minitorch_accum.testing.strategies import arrays, shapes
from tests.ops.helpers import leaf


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@given(data=st.data())
def test_softmax_gradients(name: str, data: st.DataObject) -> None:
    shape = data.draw(shapes(min_dims=1))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = leaf(data.draw(arrays(shape)))
    weights = np.random.default_rng(1).normal(size=shape)
    gradcheck(lambda t: getattr(t, name)(axis) * weights, [x])
    gradcheck(lambda t: getattr(F, name)(t, dim=axis) * weights, [x])


def test_softmax_is_stable_for_huge_logits() -> None:
    x = mta.tensor([[1000.0, 1001.0, -1000.0]], dtype="float32")
    np.testing.assert_allclose(x.softmax().numpy(), [[0.26894143, 0.7310586, 0.0]], rtol=1e-6)
    assert np.isfinite(x.log_softmax().numpy()[:, :2]).all()
    assert np.isfinite(x.logsumexp().item())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_gradient_with_padding(reduction: str) -> None:
    rng = np.random.default_rng(6)
    logits = leaf(rng.normal(size=(3, 4, 5)))
    targets = rng.integers(0, 5, size=(3, 4))
    targets[0, 2:] = -100
    targets[2, 3] = -100
    gradcheck(lambda t: F.cross_entropy(t, targets, reduction=reduction), [logits])


def test_cross_entropy_takes_flattened_logits_and_target_tensors() -> None:
    rng = np.random.default_rng(7)
    logits = leaf(rng.normal(size=(2, 3, 5)))
    targets = mta.tensor(rng.integers(0, 5, size=(2, 3)))
    targets.data[1, 2] = -1
    flat = F.cross_entropy(logits.view(-1, 5), targets.view(-1), ignore_index=-1)
    np.testing.assert_allclose(flat.item(), F.cross_entropy(logits, targets.data, ignore_index=-1).item(),
                               rtol=1e-15)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_gradient(reduction: str) -> None:
    rng = np.random.default_rng(7)
    p, t = leaf(rng.normal(size=(4, 3))), leaf(rng.normal(size=(4, 3)))
    gradcheck(lambda a, b: F.mse_loss(a, b, reduction=reduction), [p, t])

"""Losses: reductions, padded sequence targets, and their error messages."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import OpError
from minitorch_accum.nn import functional as F


def reference_cross_entropy(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]


def test_cross_entropy_reductions_with_padding() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 7))
    targets = rng.integers(0, 7, size=(2, 5))
    targets[1, 3:] = -100
    valid = targets != -100
    per_item = np.where(valid, reference_cross_entropy(logits, np.where(valid, targets, 0)), 0.0)
    x = mta.tensor(logits, dtype="float64")
    np.testing.assert_allclose(F.cross_entropy(x, targets, reduction="none").numpy(), per_item, rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(x, targets, reduction="sum").item(), per_item.sum(), rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(x, targets).item(), per_item.sum() / valid.sum(), rtol=1e-12)
    assert F.count_items(targets) == int(valid.sum()) == 8


def test_cross_entropy_custom_ignore_index() -> None:
    logits = mta.tensor(np.zeros((3, 4)))
    loss = F.cross_entropy(logits, np.array([0, 3, 0]), ignore_index=0)
    np.testing.assert_allclose(loss.item(), np.log(4.0), rtol=1e-6)


def test_cross_entropy_errors_name_the_problem() -> None:
    logits = mta.tensor(np.zeros((4, 10)))
    with pytest.raises(OpError, match=r"logits of shape \(4, 10\) need targets of shape \(4,\), got \(5,\)"):
        F.cross_entropy(logits, np.zeros(5, dtype=np.int64))
    with pytest.raises(OpError, match="target 12 is out of range for 10 classes"):
        F.cross_entropy(logits, np.array([0, 1, 12, 2]))
    with pytest.raises(TypeError, match="targets must be integer class ids, got dtype float32"):
        F.cross_entropy(logits, mta.tensor([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="reduction must be one of mean, sum, none, got 'avg'"):
        F.cross_entropy(logits, np.zeros(4, dtype=np.int64), reduction="avg")


def test_mse_loss_rejects_silent_broadcasting() -> None:
    p = mta.tensor(np.ones((4, 1)))
    with pytest.raises(OpError, match=r"prediction has shape \(4, 1\) but target has \(4,\)"):
        F.mse_loss(p, mta.tensor(np.ones(4)))
    np.testing.assert_allclose(F.mse_loss(p, np.zeros((4, 1))).item(), 1.0)


def test_embedding_rejects_out_of_range_ids() -> None:
    weight = mta.tensor(np.ones((3, 2)), requires_grad=True)
    with pytest.raises(OpError, match="id 3 is out of range for 3 embeddings"):
        F.embedding(np.array([0, 3]), weight)

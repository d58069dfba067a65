"""Small user-style models and batches for the tests of the equivalence API."""

from __future__ import annotations

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.nn import functional as F


class Residual(nn.Module):
    """A user's model that is no Sequential: a residual block with LayerNorm, then a head."""

    def __init__(self, inputs: int = 5, width: int = 8, classes: int = 3) -> None:
        mta.manual_seed(0)
        self.embed = nn.Linear(inputs, width)
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Linear(width, width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        h = self.embed(x)
        return self.head(h + self.mlp(self.norm(h)).tanh())


def summed_loss(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output, targets, reduction="sum"), F.count_items(targets)


def batch(rows: int = 12, inputs: int = 5, classes: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(rows, inputs)), rng.integers(0, classes, rows)


def padded_tokens(rows: int = 8, length: int = 5, vocab: int = 7, classes: int = 4,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and per-position targets, padded (-100) after a drawn length."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(rows, length))
    lengths = rng.integers(1, length + 1, size=rows)
    targets = np.where(np.arange(length)[None, :] < lengths[:, None], rng.integers(0, classes, (rows, length)), -100)
    return ids, targets


def token_model() -> nn.Module:
    mta.manual_seed(1)
    return nn.Sequential(nn.Embedding(7, 6), nn.Tanh(), nn.Linear(6, 4))


def padded_loss(output: mta.Tensor, targets: np.ndarray) -> tuple[mta.Tensor, int]:
    return F.cross_entropy(output, targets, reduction="sum", ignore_index=-100), F.count_items(targets)

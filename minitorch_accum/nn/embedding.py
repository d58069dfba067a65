"""Embedding table: integer ids to rows of a (num_embeddings, dim) weight."""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import DeviceLike
from minitorch_accum.nn import functional as F
from minitorch_accum.nn.init import normal
from minitorch_accum.nn.module import Module

__all__ = ["Embedding"]


class Embedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, *, dtype: Any = "float32",
                 device: DeviceLike | None = "cpu", rng: np.random.Generator | None = None) -> None:
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = normal((num_embeddings, embedding_dim), 1.0, dtype=dtype, device=device, rng=rng)

    def forward(self, ids: Any) -> Tensor:
        return F.embedding(ids, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"

"""Embedding table: integer ids to rows of a (num_embeddings, dim) weight."""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import DeviceLike
from minitorch_accum.nn import functional as F
from minitorch_accum.nn.init import normal
from minitorch_accum.nn.module import Module, weight_orientation

__all__ = ["Embedding"]


class Embedding(Module):
    """Rows of a (num_embeddings, embedding_dim) table, N(0, 1) at init as in PyTorch.

    Tying: assigning a Linear(dim, num_embeddings)'s (dim, num_embeddings) weight
    (``wte.weight = lm_head.weight``, nanoGPT's spelling) makes the lookup read it
    transposed; ``weight_transposed`` says which is in use.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, *, dtype: Any = None,
                 device: DeviceLike | None = "cpu", rng: np.random.Generator | None = None) -> None:
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = normal((num_embeddings, embedding_dim), 1.0, dtype=dtype, device=device, rng=rng,
                             layout="out_in")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "weight":
            own = (self.num_embeddings, self.embedding_dim)
            object.__setattr__(self, "weight_transposed", weight_orientation("Embedding", value, own, "out_in"))
        object.__setattr__(self, name, value)

    def forward(self, ids: Any) -> Tensor:
        return F.embedding(ids, self.weight.mT if self.weight_transposed else self.weight)

    def extra_repr(self) -> str:
        tied = ", weight used transposed" if self.weight_transposed else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{tied}"

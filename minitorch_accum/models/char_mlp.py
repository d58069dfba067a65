"""A next-character model without attention: each position on its own."""

from __future__ import annotations

from typing import Any

from minitorch_accum.nn import GELU, Embedding, LayerNorm, Linear, Module, Sequential

__all__ = ["CharMLP"]


class CharMLP(Module):
    """Embedding, a LayerNorm'd MLP per position, logits over the vocabulary (the sequences task)."""

    def __init__(self, vocab: int, dim: int = 32, hidden: int = 64, dtype: Any = "float32") -> None:
        self.embed = Embedding(vocab, dim, dtype=dtype)
        self.body = Sequential(LayerNorm(dim, dtype=dtype), Linear(dim, hidden, dtype=dtype), GELU(),
                               Linear(hidden, vocab, dtype=dtype))

    def forward(self, ids: Any) -> Any:
        return self.body(self.embed(ids))

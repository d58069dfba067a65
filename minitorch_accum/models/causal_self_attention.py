"""Causal multi-head self-attention, nanoGPT's shape."""

from __future__ import annotations

from typing import Any

from minitorch_accum.autodiff import Tensor
from minitorch_accum.models.transformer_config import TransformerConfig
from minitorch_accum.nn import Linear, Module
from minitorch_accum.nn import functional as F

__all__ = ["CausalSelfAttention"]


class CausalSelfAttention(Module):
    """q, k, v from one Linear, heads attend only to earlier positions, one output Linear."""

    def __init__(self, config: TransformerConfig, dtype: Any) -> None:
        self.qkv = Linear(config.n_embd, 3 * config.n_embd, dtype=dtype)
        self.proj = Linear(config.n_embd, config.n_embd, dtype=dtype)
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x: Tensor) -> Tensor:
        # nanoGPT's split into q, k and v, its heads, scaled_dot_product_attention(is_causal=True)
        # and the heads merged, as one op that keeps only the attention probabilities for backward
        return self.proj(F.packed_qkv_attention(self.qkv(x), self.n_head, is_causal=True))

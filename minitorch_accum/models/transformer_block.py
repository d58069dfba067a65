"""One pre-LayerNorm transformer block."""

from __future__ import annotations

from typing import Any

from minitorch_accum.autodiff import Tensor
from minitorch_accum.models.causal_self_attention import CausalSelfAttention
from minitorch_accum.models.transformer_config import TransformerConfig
from minitorch_accum.nn import GELU, LayerNorm, Linear, Module, Sequential

__all__ = ["TransformerBlock"]


class TransformerBlock(Module):
    """x + attention(ln(x)), then x + MLP(ln(x)) with a GELU MLP four times as wide."""

    def __init__(self, config: TransformerConfig, dtype: Any) -> None:
        self.ln_1 = LayerNorm(config.n_embd, dtype=dtype)
        self.attn = CausalSelfAttention(config, dtype)
        self.ln_2 = LayerNorm(config.n_embd, dtype=dtype)
        self.mlp = Sequential(Linear(config.n_embd, 4 * config.n_embd, dtype=dtype), GELU(),
                              Linear(4 * config.n_embd, config.n_embd, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

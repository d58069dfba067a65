"""A decoder-only transformer over characters, nanoGPT's shape, with a tied head."""

from __future__ import annotations

import math
from typing import Any

from minitorch_accum.autodiff import Tensor, arange
from minitorch_accum.backend import default_generator
from minitorch_accum.models.transformer_block import TransformerBlock
from minitorch_accum.models.transformer_config import TransformerConfig
from minitorch_accum.nn import Embedding, LayerNorm, Linear, Module, ModuleList

__all__ = ["CharTransformer"]


class CharTransformer(Module):
    """A decoder-only transformer over characters (nanoGPT's shape): token and position
    embeddings, pre-LayerNorm blocks of causal multi-head attention and a GELU MLP with
    residuals, a final LayerNorm, and a head tied to the token embedding (one Param: the
    lookup reads the head's (n_embd, vocab) weight transposed). ``forward(ids)`` maps
    (batch, length) ids to (batch, length, vocab) logits."""

    def __init__(self, config: TransformerConfig, dtype: Any = "float32") -> None:
        self.config = config
        self.wte = Embedding(config.vocab_size, config.n_embd, dtype=dtype)
        self.wpe = Embedding(config.block_size, config.n_embd, dtype=dtype)
        self.blocks = ModuleList([TransformerBlock(config, dtype) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, dtype=dtype)
        self.head = Linear(config.n_embd, config.vocab_size, bias=False, dtype=dtype)
        self.wte.weight = self.head.weight  # weight tying: one parameter, one gradient in the arena
        self._init_weights()

    def _init_weights(self) -> None:
        """nanoGPT's initialization: every matrix N(0, 0.02), the two projections into the
        residual stream N(0, 0.02 / sqrt(2 n_layer)), biases 0. The library's defaults (a
        Linear's U(+-1/sqrt(fan_in)) for the tied table, N(0, 1) for positions) would drown each
        character's embedding under its position's, and the model would stall at the
        character frequencies."""
        generator = default_generator()
        residual = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if name.endswith(".bias"):
                p.data[...] = 0
            elif p.ndim == 2:
                std = residual if name.endswith(("attn.proj.weight", "mlp.2.weight")) else 0.02
                p.data[...] = generator.normal(0.0, std, size=p.shape)

    def forward(self, ids: Any) -> Tensor:
        length = ids.shape[-1]
        if length > self.config.block_size:
            raise ValueError(f"CharTransformer: a sequence of {length} characters is longer than the block size "
                             f"{self.config.block_size} the position embedding was built for")
        positions = arange(length, device=self.head.weight.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

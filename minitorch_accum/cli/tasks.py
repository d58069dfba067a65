"""The built-in tasks of the ``maccum`` command: a dataset, a model, and their split."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from minitorch_accum.autodiff import Tensor, arange
from minitorch_accum.backend import default_generator
from minitorch_accum.data import (
    DEFAULT_BLOCK_SIZE,
    ArrayDataset,
    SequenceDataset,
    load_chars,
    load_digits,
    load_sequences,
)
from minitorch_accum.nn import GELU, Embedding, LayerNorm, Linear, Module, ModuleList, ReLU, Sequential
from minitorch_accum.nn import functional as F

__all__ = ["TASKS", "CharTransformer", "Task", "TransformerConfig", "load_task"]

TASKS = ("digits", "sequences", "chars")


@dataclass
class Task:
    name: str
    train: Any
    valid: Any
    model: Module
    description: str


class CharModel(Module):
    """Next-character model: embedding, a LayerNorm'd MLP per position, logits over the vocabulary."""

    def __init__(self, vocab: int, dim: int = 32, hidden: int = 64, dtype: Any = "float32") -> None:
        self.embed = Embedding(vocab, dim, dtype=dtype)
        self.body = Sequential(LayerNorm(dim, dtype=dtype), Linear(dim, hidden, dtype=dtype), GELU(),
                               Linear(hidden, vocab, dtype=dtype))

    def forward(self, ids: Any) -> Any:
        return self.body(self.embed(ids))


@dataclass(frozen=True)
class TransformerConfig:
    """The shape of the character transformer. The defaults keep one epoch of the shipped
    text on two CPU cores to seconds while every micro-batch still holds megabytes of
    activations (batch x block x layers), which is what accumulation saves."""

    vocab_size: int
    block_size: int = DEFAULT_BLOCK_SIZE
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"TransformerConfig: n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")


class _CausalSelfAttention(Module):
    """q, k, v from one Linear, heads attend only to earlier positions, one output Linear."""

    def __init__(self, config: TransformerConfig, dtype: Any) -> None:
        self.qkv = Linear(config.n_embd, 3 * config.n_embd, dtype=dtype)
        self.proj = Linear(config.n_embd, config.n_embd, dtype=dtype)
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        q, k, v = (t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2)
                   for t in self.qkv(x).split(self.n_embd, dim=2))
        # one fused op that keeps only the attention probabilities for backward
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(batch, length, width))


class _Block(Module):
    """Pre-LayerNorm transformer block: x + attention(ln(x)), then x + MLP(ln(x))."""

    def __init__(self, config: TransformerConfig, dtype: Any) -> None:
        self.ln_1 = LayerNorm(config.n_embd, dtype=dtype)
        self.attn = _CausalSelfAttention(config, dtype)
        self.ln_2 = LayerNorm(config.n_embd, dtype=dtype)
        self.mlp = Sequential(Linear(config.n_embd, 4 * config.n_embd, dtype=dtype), GELU(),
                              Linear(4 * config.n_embd, config.n_embd, dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


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
        self.blocks = ModuleList([_Block(config, dtype) for _ in range(config.n_layer)])
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


def _split_sequences(data: SequenceDataset, fraction: float) -> tuple[SequenceDataset, SequenceDataset]:
    cut = round(fraction * len(data))
    return (SequenceDataset(data.sequences[:cut], data.vocab), SequenceDataset(data.sequences[cut:], data.vocab))


def load_task(name: str, dtype: Any = "float32", block_size: int | None = None) -> Task:
    """Dataset, validation split and a freshly initialized model (seed first for reproducibility).

    ``block_size`` (characters per window) applies to ``chars`` only; None takes its default."""
    if block_size is not None and name != "chars":
        raise ValueError(f"--block-size applies to --dataset chars, not {name!r}")
    if name == "digits":
        train, valid = load_digits().split(0.8, seed=0)
        assert isinstance(train, ArrayDataset)
        model = Sequential(Linear(64, 128, dtype=dtype), ReLU(), Linear(128, 10, dtype=dtype))
        return Task(name, train, valid, model, "scikit-learn digits (8x8 images, 10 classes), MLP 64-128-10")
    if name == "sequences":
        data = load_sequences()
        train, valid = _split_sequences(data, 0.85)
        return Task(name, train, valid, CharModel(data.vocab_size, dtype=dtype),
                    f"next-character prediction over padded sentences (vocabulary {data.vocab_size})")
    if name == "chars":
        data = load_chars(DEFAULT_BLOCK_SIZE if block_size is None else block_size)
        train, valid = data.split(0.9)
        config = TransformerConfig(data.vocab_size, data.block_size)
        model = CharTransformer(config, dtype=dtype)
        parameters = sum(p.size for p in model.parameters())
        return Task(name, train, valid, model,
                    f"next-character prediction over Shakespeare's Coriolanus ({len(data.ids):,} characters, "
                    f"vocabulary {data.vocab_size}) in windows of {data.block_size}; transformer of "
                    f"{config.n_layer} layers, {config.n_head} heads, width {config.n_embd}, tied head, "
                    f"{parameters:,} parameters")
    raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(TASKS)}")

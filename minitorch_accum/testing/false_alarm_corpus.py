"""The model families the verdicts are measured on: correct models that must pass, every time.

Each family is a model factory (unseeded: the check owns the seed), a summed loss with its
item count, and a batch drawn from a seed. Together they hold what makes a rounding bound
cry wolf: gradients that cancel to 0 (an attention key bias, GPT-2's fused qkv bias, a bias
before LayerNorm), tied weights, LayerNorm, embeddings over padded sequences with a causal
label shift, residual and GELU/tanh MLPs, dropout (as a layer, functional, and in attention),
a squared-error head, and a deep narrow tanh stack. ``false_alarms.py`` runs every property
on them over drawn splits in float32 and float64, and the museum's faulty recipes on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.models import CharTransformer, TransformerConfig
from minitorch_accum.nn import GELU, Dropout, Embedding, LayerNorm, Linear, Module, ReLU, Sequential, Tanh
from minitorch_accum.nn import functional as F
from minitorch_accum.testing.summed_losses import shifted_cross_entropy, summed_cross_entropy

__all__ = ["FAMILIES", "Family"]

PAD = -100
VOCAB = 11
LENGTH = 6


@dataclass(frozen=True)
class Family:
    """A model factory, its loss and a batch maker; ``sequences``: the batch is padded token ids
    whose loss shifts the labels (a causal LM), which some museum bugs need to show."""

    name: str
    factory: Callable[[], Module]
    loss_fn: Callable[[Any, Any], tuple[Tensor, int]]
    batch: Callable[[int, int], tuple[Any, Any]]
    sequences: bool = False


# --------------------------------------------------------------------------------- losses
def _padded_cross_entropy(output: Tensor, targets: np.ndarray) -> tuple[Tensor, int]:
    return F.cross_entropy(output, targets, reduction="sum", ignore_index=PAD), F.count_items(targets)


def _summed_squares(output: Tensor, targets: np.ndarray) -> tuple[Tensor, int]:
    return F.mse_loss(output, targets, reduction="sum"), len(targets)


# --------------------------------------------------------------------------------- batches
def _features(seed: int, rows: int, width: int = 5, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(rows, width)), rng.integers(0, classes, rows)


def _regression(seed: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(rows, 5)), rng.normal(size=(rows, 2))


def _padded_sequences(seed: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and their labels, padded after a drawn length of 2 to LENGTH tokens."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=(rows, LENGTH))
    lengths = rng.integers(2, LENGTH + 1, size=rows)
    return ids, np.where(np.arange(LENGTH)[None, :] < lengths[:, None], ids, PAD)


def _padded_classes(seed: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, VOCAB, size=(rows, LENGTH))
    lengths = rng.integers(1, LENGTH + 1, size=rows)
    labels = rng.integers(0, 4, size=(rows, LENGTH))
    return ids, np.where(np.arange(LENGTH)[None, :] < lengths[:, None], labels, PAD)


# --------------------------------------------------------------------------------- models
class AttentionHead(Module):
    """One causal attention head over embeddings, q, k and v each a Linear with a bias (GPT-2's
    layout): the key bias's true gradient is exactly 0 (softmax ignores a constant added to
    every key); ``dropout`` drops attention probabilities and the residual stream."""

    def __init__(self, width: int = 8, dropout: float = 0.0) -> None:
        self.embed = Embedding(VOCAB, width)
        self.q, self.k, self.v = Linear(width, width), Linear(width, width), Linear(width, width)
        self.head = Linear(width, VOCAB)
        self.dropout = dropout

    def forward(self, ids: Any) -> Tensor:
        x = self.embed(ids)
        y = F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x), is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.head(F.dropout(x + y, self.dropout, self.training))


class BiasBeforeNorm(Module):
    """A Linear's bias feeding LayerNorm: its gradient sums to 0 along the features."""

    def __init__(self) -> None:
        self.inner, self.norm, self.out = Linear(5, 8), LayerNorm(8), Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.norm(self.inner(x)).tanh())


class Residual(Module):
    """A residual block with LayerNorm, then a head."""

    def __init__(self) -> None:
        self.embed, self.norm, self.mlp, self.head = Linear(5, 8), LayerNorm(8), Linear(8, 8), Linear(8, 3)

    def forward(self, x: Tensor) -> Tensor:
        h = self.embed(x)
        return self.head(h + self.mlp(self.norm(h)).tanh())


class TiedMLP(Module):
    """One square Linear applied twice: its gradient is the sum of two uses within every row."""

    def __init__(self) -> None:
        self.square, self.head = Linear(5, 5), Linear(5, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.square(self.square(x).tanh()).tanh())


def _tiny_lm() -> Module:
    return CharTransformer(TransformerConfig(vocab_size=VOCAB, block_size=LENGTH, n_layer=1, n_head=2, n_embd=8))


FAMILIES: dict[str, Family] = {family.name: family for family in (
    Family("attention_key_bias", AttentionHead, shifted_cross_entropy, _padded_sequences, sequences=True),
    Family("tiny_lm_fused_qkv_tied", _tiny_lm, shifted_cross_entropy, _padded_sequences, sequences=True),
    Family("attention_dropout", lambda: AttentionHead(dropout=0.2), shifted_cross_entropy, _padded_sequences,
           sequences=True),
    Family("bias_before_layer_norm", BiasBeforeNorm, summed_cross_entropy, _features),
    Family("residual_layer_norm", Residual, summed_cross_entropy, _features),
    Family("tied_square_linear", TiedMLP, summed_cross_entropy, _features),
    Family("padded_embeddings", lambda: Sequential(Embedding(VOCAB, 6), Tanh(), Linear(6, 4)),
           _padded_cross_entropy, _padded_classes),
    Family("gelu_tanh_mlp", lambda: Sequential(Linear(5, 8), GELU("tanh"), Linear(8, 8), Tanh(), Linear(8, 3)),
           summed_cross_entropy, _features),
    Family("relu_mlp_dropout", lambda: Sequential(Linear(5, 8), ReLU(), Dropout(0.3), Linear(8, 3)),
           summed_cross_entropy, _features),
    Family("mlp_in_eval_mode", lambda: Sequential(Linear(5, 8), GELU(), Dropout(0.5), Linear(8, 3)).eval(),
           summed_cross_entropy, _features),
    Family("squared_error_head", lambda: Sequential(Linear(5, 6), Tanh(), Linear(6, 2)), _summed_squares,
           _regression),
    Family("deep_narrow_tanh", lambda: Sequential(*(m for _ in range(4) for m in (Linear(3, 3), Tanh())),
                                                  Linear(3, 3)),
           summed_cross_entropy, lambda seed, rows: _features(seed, rows, width=3)),
)}

"""Accumulation cases: a model, a batch, a split into micro-batches, and how to accumulate.

A ``Case`` can run itself both ways, as k micro-batches through an Accumulator and
as one big batch, so a property test (or a user) can compare the two. Its window may
be partial (an Accumulator of ``steps`` greater than the micro-batches given, closed
early) and its model may use a parameter twice (``ModelSpec.tie``). The hypothesis
strategies that draw cases live in ``accumulation_strategies``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.accum.normalization import micro_batch_loss_reduction
from minitorch_accum.autodiff import Tensor, tensor
from minitorch_accum.backend import manual_seed
from minitorch_accum.nn import (
    GELU,
    BatchNorm1d,
    Embedding,
    LayerNorm,
    Linear,
    Module,
    ReLU,
    Sequential,
    Tanh,
)
from minitorch_accum.nn import functional as F

__all__ = ["ACTIVATIONS", "TIES", "Case", "ModelSpec", "run_full_batch", "run_window"]

ACTIVATIONS = {"relu": ReLU, "gelu": GELU, "tanh": Tanh}
#: how a model may use one parameter twice: not at all, one square Linear applied twice
#: (``[S, act, S, act]``), or two Linear layers holding one weight Param (``[A, act, B, act]``,
#: ``B.weight is A.weight``, biases separate)
TIES = ("none", "reuse", "share")
PAD = -100


@dataclass(frozen=True)
class ModelSpec:
    """A small model: an MLP (``kind="mlp"``) on float features, or an embedding and a linear
    head (``kind="embedding"``) on padded token sequences.

    ``tie`` (one of ``TIES``) puts a block of width ``widths[0]`` whose weight is used twice
    in every forward pass in front of the MLP (after the embedding): its gradient is the
    sum of two contributions within each micro-batch."""

    kind: str = "mlp"
    widths: tuple[int, ...] = (5, 8, 3)  # in, hidden..., classes
    activation: str = "tanh"
    layer_norm: bool = False
    batch_norm: bool = False
    vocab: int = 7
    seq_len: int = 4
    seed: int = 0
    tie: str = "none"

    def __post_init__(self) -> None:
        if self.tie not in TIES:
            raise ValueError(f"ModelSpec: tie must be one of {', '.join(TIES)}, got {self.tie!r}")

    @property
    def classes(self) -> int:
        return self.widths[-1]

    def build(self, dtype: str = "float64") -> Module:
        """The model, initialized from ``seed`` (the same values for every dtype)."""
        manual_seed(self.seed)
        if self.kind == "embedding":
            embedding = Embedding(self.vocab, self.widths[0], dtype=dtype)
            return Sequential(embedding, *self._tied_block(dtype), Linear(self.widths[0], self.classes, dtype=dtype))
        layers: list[Module] = list(self._tied_block(dtype))
        for i, (a, b) in enumerate(zip(self.widths[:-1], self.widths[1:], strict=True)):
            layers.append(Linear(a, b, dtype=dtype))
            if i < len(self.widths) - 2:
                if self.batch_norm:
                    layers.append(BatchNorm1d(b, dtype=dtype))
                if self.layer_norm:
                    layers.append(LayerNorm(b, dtype=dtype))
                layers.append(ACTIVATIONS[self.activation]())
        return Sequential(*layers)

    def _tied_block(self, dtype: str) -> list[Module]:
        if self.tie == "none":
            return []
        width = self.widths[0]
        first = Linear(width, width, dtype=dtype)
        if self.tie == "reuse":
            second = first
        else:
            second = Linear(width, width, dtype=dtype)
            second.weight = first.weight
        return [first, ACTIVATIONS[self.activation](), second, ACTIVATIONS[self.activation]()]

    def data(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """n items: float features (or token ids) and integer targets; sequences end in padding."""
        rng = np.random.default_rng(seed)
        if self.kind == "embedding":
            ids = rng.integers(0, self.vocab, size=(n, self.seq_len))
            targets = rng.integers(0, self.classes, size=(n, self.seq_len))
            lengths = rng.integers(1, self.seq_len + 1, size=n)
            targets[np.arange(self.seq_len)[None, :] >= lengths[:, None]] = PAD
            return ids, targets
        return rng.normal(size=(n, self.widths[0])), rng.integers(0, self.classes, size=n)


@dataclass(frozen=True)
class Case:
    """One comparison: ``sizes`` splits the ``sum(sizes)`` items into micro-batches.

    ``steps`` is the Accumulator's k; None means ``len(sizes)`` (one full window). A larger
    k makes the window partial: it is closed early, holding ``len(sizes)`` micro-batches, and
    normalized by what it holds (``mean`` by those micro-batches, ``items`` by their items)."""

    model: ModelSpec = field(default_factory=ModelSpec)
    sizes: tuple[int, ...] = (2, 3)
    reduction: str = "items"
    fusion: str = "leaf"
    dtype: str = "float64"  # parameters and activations
    compensated: bool = False
    data_seed: int = 0
    steps: int | None = None

    def __post_init__(self) -> None:
        if self.steps is not None and self.steps < len(self.sizes):
            raise ValueError(f"Case: steps={self.steps} cannot hold {len(self.sizes)} micro-batches")

    @property
    def items(self) -> int:
        return sum(self.sizes)

    @property
    def window_steps(self) -> int:
        """The Accumulator's k: ``steps``, or the number of micro-batches."""
        return len(self.sizes) if self.steps is None else self.steps

    @property
    def partial(self) -> bool:
        """True when the window is closed before it holds k micro-batches."""
        return self.window_steps > len(self.sizes)

    def accumulator(self, model: Module) -> Accumulator:
        """An Accumulator over ``model`` as the case describes it (k, reduction, fusion, dtype)."""
        return Accumulator(model, steps=self.window_steps, reduction=self.reduction, fusion=self.fusion,
                           accum_dtype=self.accum_dtype, compensated=self.compensated)

    @property
    def accum_dtype(self) -> str:
        return "float64" if self.dtype == "float64" else "float32"

    def with_(self, **changes: Any) -> Case:
        return replace(self, **changes)

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        return self.model.data(self.items, self.data_seed)

    def slices(self) -> list[slice]:
        bounds = np.cumsum((0, *self.sizes))
        return [slice(int(a), int(b)) for a, b in pairwise(bounds)]

    def inputs(self, x: np.ndarray) -> Any:
        return x if self.model.kind == "embedding" else tensor(x, dtype=self.dtype)

    def loss(self, model: Module, x: np.ndarray, y: np.ndarray, reduction: str) -> Tensor:
        return F.cross_entropy(model(self.inputs(x)), y, reduction=reduction)


def run_window(case: Case, model: Module | None = None, order: list[int] | None = None,
               accumulator: Accumulator | None = None) -> tuple[Module, Accumulator]:
    """Accumulate the case's micro-batches (in ``order``) and return the model and the
    accumulator, whose window (full, or partial when ``case.steps`` exceeds them) is ready for
    ``grads()`` or an optimizer."""
    model = model or case.model.build(case.dtype)
    x, y = case.batch()
    acc = accumulator or case.accumulator(model)
    parts = case.slices()
    for index in order if order is not None else range(len(parts)):
        part = parts[index]
        per_batch = micro_batch_loss_reduction(case.reduction)
        acc.backward(case.loss(model, x[part], y[part], per_batch), num_items=F.count_items(y[part]))
    return model, acc


def run_full_batch(case: Case, model: Module | None = None) -> tuple[Module, dict[str, np.ndarray]]:
    """The gradient of one batch of all the case's items, normalized the exact way
    (summed loss / items; summed loss for ``reduction="sum"``), by parameter name."""
    model = model or case.model.build(case.dtype)
    x, y = case.batch()
    loss = case.loss(model, x, y, "sum")
    grads = loss.backward()
    scale = 1.0 if case.reduction == "sum" else 1.0 / F.count_items(y)
    return model, {name: np.asarray(grads[p], dtype=np.float64) * scale for name, p in model.named_parameters()}


"""The built-in tasks of the ``maccum`` command: a dataset, a model, and their split."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minitorch_accum.data import ArrayDataset, SequenceDataset, load_digits, load_sequences
from minitorch_accum.nn import GELU, Embedding, LayerNorm, Linear, Module, ReLU, Sequential

__all__ = ["TASKS", "Task", "load_task"]

TASKS = ("digits", "sequences")


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


def _split_sequences(data: SequenceDataset, fraction: float) -> tuple[SequenceDataset, SequenceDataset]:
    cut = round(fraction * len(data))
    return (SequenceDataset(data.sequences[:cut], data.vocab), SequenceDataset(data.sequences[cut:], data.vocab))


def load_task(name: str, dtype: Any = "float32") -> Task:
    """Dataset, validation split and a freshly initialized model (seed first for reproducibility)."""
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
    raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(TASKS)}")

"""The built-in tasks of the ``maccum`` command: a dataset, its split, and the model it trains
(the models are ``minitorch_accum.models``; this file only pairs them with their data)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minitorch_accum.data import DATASETS, DEFAULT_BLOCK_SIZE, SequenceDataset, load_chars, load_digits, load_sequences
from minitorch_accum.models import DIGITS_MLP_VARIANTS, CharMLP, CharTransformer, TransformerConfig, digits_mlp
from minitorch_accum.nn import Module

__all__ = ["MODELS", "Task", "load_task"]

#: ``--model``: the task's own model, or a digits MLP whose items are coupled (BatchNorm) or masked (dropout)
MODELS = ("task", *DIGITS_MLP_VARIANTS)
_DESCRIPTIONS = {"task": "MLP 64-128-10", "batchnorm": "MLP 64-128-BatchNorm1d-10",
                 "dropout": "MLP 64-128-10 with dropout 0.2 after the hidden layer"}


@dataclass
class Task:
    name: str
    train: Any
    valid: Any
    model: Module
    description: str


def _split_sequences(data: SequenceDataset, fraction: float) -> tuple[SequenceDataset, SequenceDataset]:
    cut = round(fraction * len(data))
    return (SequenceDataset(data.sequences[:cut], data.vocab), SequenceDataset(data.sequences[cut:], data.vocab))


def load_task(name: str, dtype: Any = "float32", block_size: int | None = None, model: str = "task") -> Task:
    """Dataset, validation split and a freshly initialized model (seed first for reproducibility).

    ``block_size`` (characters of context) applies to ``chars`` only; None takes its default.
    ``model`` (``MODELS``): the task's own, or for digits an MLP with BatchNorm or dropout."""
    if block_size is not None and name != "chars":
        raise ValueError(f"--block-size applies to --dataset chars, not {name!r}")
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: expected one of {', '.join(MODELS)}")
    if model != "task" and name != "digits":
        raise ValueError(f"--model {model} is a variant of the digits MLP: use it with --dataset digits")
    if name == "digits":
        train, valid = load_digits().split(0.8, seed=0)
        return Task(name, train, valid, digits_mlp(dtype, **DIGITS_MLP_VARIANTS.get(model, {})),
                    f"scikit-learn digits (8x8 images, 10 classes), {_DESCRIPTIONS[model]}")
    if name == "sequences":
        data = load_sequences()
        train, valid = _split_sequences(data, 0.85)
        return Task(name, train, valid, CharMLP(data.vocab_size, dtype=dtype),
                    f"next-character prediction over padded sentences (vocabulary {data.vocab_size})")
    if name == "chars":
        data = load_chars(DEFAULT_BLOCK_SIZE if block_size is None else block_size)
        train, valid = data.split(0.9)
        config = TransformerConfig(data.vocab_size, data.block_size)
        model = CharTransformer(config, dtype=dtype)
        parameters = sum(p.size for p in model.parameters())
        return Task(name, train, valid, model,
                    f"next-character prediction over Shakespeare's Coriolanus ({len(data.ids):,} characters, "
                    f"vocabulary {data.vocab_size}), {data.block_size} characters of context; transformer of "
                    f"{config.n_layer} layers, {config.n_head} heads, width {config.n_embd}, tied head, "
                    f"{parameters:,} parameters")
    raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(DATASETS)}")

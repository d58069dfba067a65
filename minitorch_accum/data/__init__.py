"""Data: the DataLoader whose micro-batches tile one shuffled order, the TokenBudgetLoader whose
micro-batches are cut by a token budget, and small datasets (digits,
padded sentences, chunks of a Shakespeare text for a character transformer)."""

from minitorch_accum.data.chars import DEFAULT_BLOCK_SIZE, CharDataset, load_chars
from minitorch_accum.data.datasets import (
    PAD_TARGET,
    ArrayDataset,
    SequenceDataset,
    load_digits,
    load_sequences,
)
from minitorch_accum.data.loader import DataLoader, Dataset
from minitorch_accum.data.token_budget import TokenBudgetLoader

#: the built-in data sets (the ``maccum`` tasks train one each)
DATASETS = ("digits", "sequences", "chars")

__all__ = [
    "DATASETS",
    "DEFAULT_BLOCK_SIZE",
    "PAD_TARGET",
    "ArrayDataset",
    "CharDataset",
    "DataLoader",
    "Dataset",
    "SequenceDataset",
    "TokenBudgetLoader",
    "load_chars",
    "load_digits",
    "load_sequences",
]

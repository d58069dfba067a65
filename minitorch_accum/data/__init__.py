"""Data: the DataLoader whose micro-batches tile one shuffled order, and small datasets."""

from minitorch_accum.data.datasets import (
    PAD_TARGET,
    ArrayDataset,
    SequenceDataset,
    load_digits,
    load_sequences,
)
from minitorch_accum.data.loader import DataLoader, Dataset

__all__ = [
    "PAD_TARGET",
    "ArrayDataset",
    "DataLoader",
    "Dataset",
    "SequenceDataset",
    "load_digits",
    "load_sequences",
]

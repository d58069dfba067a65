"""Small built-in datasets: scikit-learn's bundled digits, and padded character sequences."""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np

__all__ = ["ArrayDataset", "SequenceDataset", "load_digits", "load_sequences"]

PAD_TARGET = -100


class ArrayDataset:
    """Rows of equally long arrays: ``get_batch(idx)`` returns a tuple of row slices."""

    def __init__(self, *arrays: np.ndarray) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ValueError(f"ArrayDataset: arrays have different lengths {sorted(lengths)}")
        self.arrays = arrays

    def __len__(self) -> int:
        return len(self.arrays[0])

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(a[indices] for a in self.arrays)

    def split(self, fraction: float, seed: int = 0) -> tuple[ArrayDataset, ArrayDataset]:
        """A deterministic (train, valid) split; ``fraction`` goes to train."""
        order = np.random.default_rng(seed).permutation(len(self))
        cut = round(fraction * len(self))
        return (ArrayDataset(*(a[order[:cut]] for a in self.arrays)),
                ArrayDataset(*(a[order[cut:]] for a in self.arrays)))


def load_digits(dtype: Any = np.float32) -> ArrayDataset:
    """The 1,797 8x8 handwritten digits bundled with scikit-learn: features (N, 64) in [0, 1],
    integer labels (N,). No download."""
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    return ArrayDataset((bunch.data / 16.0).astype(dtype), bunch.target.astype(np.int64))


class SequenceDataset:
    """Variable-length character sequences for next-character prediction.

    ``get_batch`` pads to the longest sequence *of the batch*: inputs with id 0,
    targets with ``PAD_TARGET`` (-100, the loss's ignore_index). Micro-batches
    therefore hold different numbers of real targets, which is what makes
    ``reduction="mean"`` differ from the exact ``"items"`` normalization.
    """

    def __init__(self, sequences: list[np.ndarray], vocab: list[str]) -> None:
        self.sequences = sequences
        self.vocab = vocab

    def __len__(self) -> int:
        return len(self.sequences)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def lengths(self) -> np.ndarray:
        """The positions of each sequence in a batch (its length less one: inputs and targets are
        shifted by one), before padding; what ``TokenBudgetLoader`` counts."""
        return np.array([len(s) - 1 for s in self.sequences], dtype=np.int64)

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chosen = [self.sequences[i] for i in indices]
        width = max(len(s) for s in chosen) - 1
        inputs = np.zeros((len(chosen), width), dtype=np.int64)
        targets = np.full((len(chosen), width), PAD_TARGET, dtype=np.int64)
        for row, seq in enumerate(chosen):
            inputs[row, :len(seq) - 1] = seq[:-1]
            targets[row, :len(seq) - 1] = seq[1:]
        return inputs, targets


def load_sequences(min_length: int = 8, max_length: int = 64) -> SequenceDataset:
    """Sentences of the text shipped with the package, as id sequences (id 0 is padding)."""
    text = resources.files("minitorch_accum.data").joinpath("sequences.txt").read_text(encoding="utf-8")
    sentences = [" ".join(s.split()) for s in text.replace("\n", " ").split(".")]
    sentences = [s[:max_length] + "." for s in sentences if len(s) + 1 >= min_length]
    vocab = ["<pad>", *sorted({c for s in sentences for c in s})]
    index = {c: i for i, c in enumerate(vocab)}
    sequences = [np.array([index[c] for c in s], dtype=np.int64) for s in sentences]
    return SequenceDataset(sequences, vocab)

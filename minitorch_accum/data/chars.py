"""Next-character prediction over a public-domain text shipped with the package.

The text (``coriolanus.txt``: Shakespeare, read at import time from the package, never
downloaded) is cut into chunks of ``block_size`` characters (the context the model sees). An item is one
chunk; its
targets are the ``block_size`` characters that follow each of its characters, and every
target is a real character, so a micro-batch of b chunks holds exactly b x block_size
items (the unit ``reduction="items"`` divides by).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["DEFAULT_BLOCK_SIZE", "CharDataset", "load_chars", "read_text"]

#: characters per chunk (the context) unless told otherwise (``--block-size``)
DEFAULT_BLOCK_SIZE = 32

_TEXT = "coriolanus.txt"


class CharDataset:
    """Chunks of ``block_size`` characters over one text, encoded as ids into ``vocab``.

    Item i starts at character ``i * block_size``: chunks tile the text without overlap,
    so one epoch predicts every character once (all but the first, which nothing precedes).
    ``get_batch`` returns (inputs, targets), both int64 of shape (n, block_size), targets
    shifted by one character.
    """

    def __init__(self, ids: np.ndarray, vocab: list[str], block_size: int) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int | np.integer) or block_size <= 0:
            raise ValueError(f"CharDataset: block_size must be a positive int, got {block_size!r}")
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1:
            raise ValueError(f"CharDataset: ids must be one sequence, got shape {ids.shape}")
        if len(ids) < block_size + 1:
            raise ValueError(f"CharDataset: a chunk of {block_size} characters needs {block_size + 1} "
                             f"(inputs and the next character), the text has {len(ids)}")
        if len(ids) and (ids.min() < 0 or ids.max() >= len(vocab)):
            raise ValueError(f"CharDataset: ids must lie in [0, {len(vocab)}) (the vocabulary)")
        self.ids = ids
        self.vocab = list(vocab)
        self.block_size = int(block_size)
        self._index = {c: i for i, c in enumerate(self.vocab)}

    def __len__(self) -> int:
        return (len(self.ids) - 1) // self.block_size

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def lengths(self) -> np.ndarray:
        """The tokens of each chunk: ``block_size``, all alike (what ``TokenBudgetLoader`` counts)."""
        return np.full(len(self), self.block_size, dtype=np.int64)

    @property
    def num_items(self) -> int:
        """Target characters over all chunks: the items of one epoch."""
        return len(self) * self.block_size

    def get_batch(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= len(self)):
            raise IndexError(f"CharDataset: chunk index out of range [0, {len(self)}): {indices.tolist()}")
        # one gather of (n, block_size + 1) characters, then inputs and targets side by side
        rows = self.ids[(indices * self.block_size)[:, None] + np.arange(self.block_size + 1)]
        return np.ascontiguousarray(rows[:, :-1]), np.ascontiguousarray(rows[:, 1:])

    def encode(self, text: str) -> np.ndarray:
        """Characters to ids; a character outside the vocabulary is an error that names it."""
        try:
            return np.array([self._index[c] for c in text], dtype=np.int64)
        except KeyError as missing:
            raise ValueError(f"CharDataset.encode: {missing.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.vocab[int(i)] for i in np.asarray(ids).ravel())

    def split(self, fraction: float) -> tuple[CharDataset, CharDataset]:
        """(train, valid): the first ``fraction`` of the text and the rest, each in its own
        chunks over the same vocabulary (a contiguous cut, so no chunk spans both)."""
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"CharDataset.split: fraction must be in (0, 1), got {fraction}")
        cut = round(fraction * len(self.ids))
        return (CharDataset(self.ids[:cut], self.vocab, self.block_size),
                CharDataset(self.ids[cut:], self.vocab, self.block_size))

    def __repr__(self) -> str:
        return (f"CharDataset({len(self.ids)} characters, vocabulary {self.vocab_size}, block_size "
                f"{self.block_size}, {len(self)} chunks)")


def read_text() -> tuple[str, str]:
    """(source, text): the header line naming where the text comes from, and the text."""
    raw = resources.files("minitorch_accum.data").joinpath(_TEXT).read_text(encoding="utf-8")
    header, _, text = raw.partition("\n")
    return header.removeprefix("# "), text


def load_chars(block_size: int = DEFAULT_BLOCK_SIZE) -> CharDataset:
    """The shipped text as chunks of ``block_size`` characters; the vocabulary is its
    characters in sorted order."""
    _, text = read_text()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    return CharDataset(np.array([index[c] for c in text], dtype=np.int64), vocab, block_size)

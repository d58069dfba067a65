"""TokenBudgetLoader: micro-batches cut by a token budget, as language models are trained.

A micro-batch holds as many sequences as fit ``max_tokens`` once padded to its longest
(rows x longest <= max_tokens), so its number of rows and of real tokens varies from one
micro-batch to the next: short sequences travel many to a micro-batch, long ones few. That
is where the window's normalization matters: ``reduction="items"`` divides the window's
summed loss by the tokens it really held, and the window then equals one batch of the same
sequences; a mean of micro-batch means weighs a token of a small micro-batch more
(``docs/equivalence.md``).

The cut is made once, from the items sorted by length (ties in an order fixed by the seed),
so every epoch has the same micro-batches, only their order changes (by seed and epoch, as
fairseq's ``batch_by_size`` does); the Learner's windows, resume positions and data-parallel
shares, which count micro-batches, then hold for every epoch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from minitorch_accum.data.loader import Dataset, check_loader

__all__ = ["TokenBudgetLoader"]


class TokenBudgetLoader:
    """Iterate ``dataset`` in micro-batches of at most ``max_tokens`` padded tokens.

    ``lengths``: the tokens of each item, as its batch pads them (default ``dataset.lengths``,
    which ``SequenceDataset`` and ``CharDataset`` offer). ``batch_size`` is None: no fixed
    number of items; a run records the budget instead (``{"token_budget": max_tokens}``).
    The rest is DataLoader's face: ``len``, ``batch(epoch, index)``, ``batches``, ``order``.
    """

    #: no fixed number of items per micro-batch (DataLoader's is an int)
    batch_size: None = None
    #: a budget cut keeps every item: no short last micro-batch to drop
    drop_last = False

    def __init__(self, dataset: Dataset, max_tokens: int, shuffle: bool = True, seed: int = 0,
                 lengths: Any = None) -> None:
        check_loader("TokenBudgetLoader", dataset, "max_tokens", max_tokens)
        if lengths is None:
            lengths = getattr(dataset, "lengths", None)
            if lengths is None:
                raise ValueError(f"TokenBudgetLoader: a {type(dataset).__name__} does not say how many tokens each "
                                 "item holds (no .lengths): pass lengths=, one count per item")
        lengths = np.asarray(lengths)
        if lengths.shape != (len(dataset),) or lengths.dtype.kind not in "iu" or (lengths <= 0).any():
            raise ValueError(f"TokenBudgetLoader: lengths must be one positive int per item ({len(dataset)}), got "
                             f"shape {lengths.shape} of {lengths.dtype}")
        too_long = np.flatnonzero(lengths > max_tokens)
        if too_long.size:
            item = int(too_long[0])
            raise ValueError(f"TokenBudgetLoader: item {item} holds {int(lengths[item])} tokens, more than the budget "
                             f"of max_tokens={max_tokens} ({too_long.size} of the {len(dataset)} items are longer): "
                             "raise the budget or cut them")
        self.dataset = dataset
        self.max_tokens = int(max_tokens)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.lengths = lengths.astype(np.int64)
        self.epoch = 0
        self.micro_batches = self._cut()

    def _cut(self) -> list[np.ndarray]:
        """The micro-batches, once: items by length (ties in the seed's order), each micro-batch
        growing while its rows x longest stays within the budget."""
        ties = np.random.default_rng(self.seed).permutation(len(self.lengths)) if self.shuffle \
            else np.arange(len(self.lengths))
        ordered = ties[np.argsort(self.lengths[ties], kind="stable")]
        batches: list[np.ndarray] = []
        start, longest = 0, 0
        for position, item in enumerate(ordered):
            longest_with = max(longest, int(self.lengths[item]))
            if (position - start + 1) * longest_with > self.max_tokens:
                batches.append(ordered[start:position])
                start, longest_with = position, int(self.lengths[item])
            longest = longest_with
        batches.append(ordered[start:])
        return batches

    def __len__(self) -> int:
        return len(self.micro_batches)

    def batch_order(self, epoch: int) -> np.ndarray:
        """Which micro-batch comes at each place of ``epoch``: a permutation fixed by (seed, epoch)."""
        if not self.shuffle:
            return np.arange(len(self))
        return np.random.default_rng([self.seed, epoch]).permutation(len(self))

    def indices(self, epoch: int, index: int) -> np.ndarray:
        """The items of micro-batch ``index`` of ``epoch`` (one batch of a window's items is
        ``dataset.get_batch`` of theirs together)."""
        if not 0 <= index < len(self):
            raise IndexError(f"TokenBudgetLoader: batch {index} of an epoch of {len(self)} batches")
        return self.micro_batches[int(self.batch_order(epoch)[index])]

    def order(self, epoch: int) -> np.ndarray:
        """The items of ``epoch`` in the order its micro-batches take them."""
        return np.concatenate([self.indices(epoch, index) for index in range(len(self))])

    def batch(self, epoch: int, index: int) -> Any:
        """Micro-batch number ``index`` of ``epoch``."""
        return self.dataset.get_batch(self.indices(epoch, index))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """The micro-batches of ``epoch``, beginning with number ``start`` (for resuming)."""
        for index in range(start, len(self)):
            yield self.batch(epoch, index)

    def __iter__(self) -> Iterator[Any]:
        return self.batches(self.epoch)

    def __repr__(self) -> str:
        rows = [len(b) for b in self.micro_batches]
        return (f"TokenBudgetLoader({len(self.dataset)} items, max_tokens={self.max_tokens}, {len(self)} micro-batches "
                f"of {min(rows)} to {max(rows)} items, shuffle={self.shuffle}, seed={self.seed})")

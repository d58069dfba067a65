"""DataLoader: micro-batches that are consecutive slices of one shuffled order per epoch.

The order of an epoch depends only on the seed, the epoch and the dataset's length,
never on the batch size. So k micro-batches of b items and one batch of k*b items
cover exactly the same items in each optimizer step, which is what makes the
comparison between accumulation and a big batch exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

__all__ = ["DataLoader", "Dataset"]


class Dataset(Protocol):
    """Anything with a length and a way to fetch a batch of items by index."""

    def __len__(self) -> int: ...

    def get_batch(self, indices: np.ndarray) -> Any: ...


def check_loader(loader: str, dataset: Dataset, name: str, size: Any) -> None:
    """A loader's micro-batch size ``name`` is a positive int and its dataset is not empty; errors
    name the ``loader``."""
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size <= 0:
        raise ValueError(f"{loader}: {name} must be a positive int, got {size!r}")
    if len(dataset) == 0:
        raise ValueError(f"{loader}: the dataset is empty")


class DataLoader:
    """Iterate a dataset in batches of ``batch_size``; ``iter(loader)`` yields the batches
    of the current epoch (``set_epoch``), ``batches(epoch, start)`` any epoch from any batch."""

    def __init__(self, dataset: Dataset, batch_size: int, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False) -> None:
        check_loader("DataLoader", dataset, "batch_size", batch_size)
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.drop_last = drop_last
        self.epoch = 0
        self._order_cache: tuple[int, np.ndarray] | None = None

    def order(self, epoch: int) -> np.ndarray:
        """The item order of ``epoch``: a permutation fixed by (seed, epoch) alone."""
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng([self.seed, epoch]).permutation(n)

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """The batches of ``epoch``, beginning with batch number ``start`` (for resuming)."""
        for b in range(start, len(self)):
            yield self.batch(epoch, b)

    def batch(self, epoch: int, index: int) -> Any:
        """Batch number ``index`` of ``epoch`` (data-parallel ranks each take their own)."""
        if not 0 <= index < len(self):
            raise IndexError(f"DataLoader: batch {index} of an epoch of {len(self)} batches")
        if self._order_cache is None or self._order_cache[0] != epoch:
            self._order_cache = (epoch, self.order(epoch))
        order = self._order_cache[1]
        return self.dataset.get_batch(order[index * self.batch_size:(index + 1) * self.batch_size])

    def __iter__(self) -> Iterator[Any]:
        return self.batches(self.epoch)

    def with_batch_size(self, batch_size: int) -> DataLoader:
        """The same data, order and seed with another batch size."""
        return DataLoader(self.dataset, batch_size, self.shuffle, self.seed, self.drop_last)

    def __repr__(self) -> str:
        return (f"DataLoader({len(self.dataset)} items, batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"seed={self.seed}, drop_last={self.drop_last})")

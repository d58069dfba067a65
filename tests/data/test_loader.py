"""The DataLoader's order: a permutation of every item, new each epoch, the same again for the
same seed and epoch, whatever the batch size."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.data import ArrayDataset, DataLoader


def _items(n: int = 50) -> ArrayDataset:
    # each item's x is its own index: a batch says which items it holds
    return ArrayDataset(np.arange(n, dtype=np.float64).reshape(n, 1), np.zeros(n, dtype=np.int64))


def _epoch_items(loader: DataLoader, epoch: int) -> list[int]:
    loader.set_epoch(epoch)
    return [int(v) for x, _ in loader for v in x[:, 0]]


def test_a_shuffled_loader_takes_a_new_order_each_epoch_holding_every_item_once() -> None:
    loader = DataLoader(_items(), 7, shuffle=True, seed=5)
    epochs = [_epoch_items(loader, epoch) for epoch in range(4)]
    for order in epochs:
        assert sorted(order) == list(range(50))  # every item once, the last batch partial
    assert epochs[0] != list(range(50))  # shuffled from the first epoch on
    assert len({tuple(order) for order in epochs}) == 4  # each epoch its own order


def test_the_order_is_fixed_by_seed_and_epoch_alone() -> None:
    first = DataLoader(_items(), 7, shuffle=True, seed=5)
    again = DataLoader(_items(), 7, shuffle=True, seed=5)
    assert _epoch_items(again, 3) == _epoch_items(first, 3)
    assert _epoch_items(DataLoader(_items(), 10, shuffle=True, seed=5), 3) == _epoch_items(first, 3)  # any batch size
    assert _epoch_items(DataLoader(_items(), 7, shuffle=True, seed=6), 3) != _epoch_items(first, 3)
    # order(epoch) is what the batches of that epoch hold, in turn
    np.testing.assert_array_equal(np.concatenate([x[:, 0] for x, _ in first.batches(2)]), first.order(2))


@pytest.mark.parametrize("epoch", [0, 1])
def test_an_unshuffled_loader_keeps_the_dataset_order(epoch: int) -> None:
    assert _epoch_items(DataLoader(_items(), 7, shuffle=False, seed=5), epoch) == list(range(50))

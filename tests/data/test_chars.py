"""The chars dataset: the shipped text read deterministically, ids that round-trip, chunks of
block_size characters with targets one character further on, and exact item counts."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.data import DEFAULT_BLOCK_SIZE, CharDataset, DataLoader, load_chars
from minitorch_accum.data.chars import read_text
from minitorch_accum.nn import functional as F


def test_the_text_is_shipped_named_and_read_the_same_every_time() -> None:
    source, text = read_text()
    assert "Shakespeare" in source and "public domain" in source
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")
    assert len(text) > 20_000 and not text.startswith("#")  # the header line is not training text
    first, second = load_chars(), load_chars()
    assert first.block_size == DEFAULT_BLOCK_SIZE
    np.testing.assert_array_equal(first.ids, second.ids)
    assert first.vocab == second.vocab == sorted(set(text))  # each character once, in sorted order


def test_ids_round_trip_through_the_vocabulary() -> None:
    data = load_chars()
    _, text = read_text()
    assert data.decode(data.ids) == text
    sample = "What says the other troop?"
    np.testing.assert_array_equal(data.encode(data.decode(data.encode(sample))), data.encode(sample))
    with pytest.raises(ValueError, match="'@' is not in the vocabulary"):
        data.encode("Rome@")


@pytest.mark.parametrize("block_size", [1, 8, 64])
def test_chunks_tile_the_text_and_targets_are_the_next_characters(block_size: int) -> None:
    data = load_chars(block_size)
    assert len(data) == (len(data.ids) - 1) // block_size
    last = len(data) - 1
    inputs, targets = data.get_batch(np.array([0, 3 % len(data), last]))
    assert inputs.shape == targets.shape == (3, block_size)
    assert inputs.dtype == targets.dtype == np.int64
    for row, index in enumerate([0, 3 % len(data), last]):
        start = index * block_size
        np.testing.assert_array_equal(inputs[row], data.ids[start:start + block_size])
        np.testing.assert_array_equal(targets[row], data.ids[start + 1:start + block_size + 1])
    np.testing.assert_array_equal(targets[:, :-1], inputs[:, 1:])  # shifted by exactly one character
    with pytest.raises(IndexError, match="out of range"):
        data.get_batch(np.array([len(data)]))


def test_an_epoch_holds_b_times_block_items_per_micro_batch_and_each_target_once() -> None:
    data = load_chars(16)
    loader = DataLoader(data, 7, shuffle=True, seed=3)
    items, seen = 0, []
    for inputs, targets in loader:
        # no padding: every target is a character, so a micro-batch of b chunks holds b x 16 items
        assert F.count_items(targets) == targets.size == len(inputs) * 16
        items += F.count_items(targets)
        seen.append(inputs[:, 0])
    assert items == data.num_items == len(data) * 16
    starts = np.sort(np.concatenate(seen))
    assert len(starts) == len(data)  # every chunk once per epoch


def test_split_cuts_the_text_once_and_keeps_the_vocabulary() -> None:
    data = load_chars(32)
    train, valid = data.split(0.9)
    np.testing.assert_array_equal(np.concatenate([train.ids, valid.ids]), data.ids)
    assert len(train.ids) == round(0.9 * len(data.ids))
    assert train.vocab == valid.vocab == data.vocab and train.block_size == valid.block_size == 32
    with pytest.raises(ValueError, match="fraction must be in"):
        data.split(1.0)


@pytest.mark.parametrize("block_size", [0, -3, True, 2.5])
def test_a_bad_block_size_is_refused_by_name(block_size: object) -> None:
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        load_chars(block_size)  # type: ignore[arg-type]


def test_a_text_shorter_than_one_chunk_is_refused() -> None:
    with pytest.raises(ValueError, match="a chunk of 10 characters needs 11"):
        CharDataset(np.arange(5) % 3, ["a", "b", "c"], 10)

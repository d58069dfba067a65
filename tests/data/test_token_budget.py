"""TokenBudgetLoader: micro-batches of padded sequences within a token budget, cut once, every item
once per epoch, the same micro-batches in a new order each epoch; its refusals name what is wrong."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from minitorch_accum.data import ArrayDataset, SequenceDataset, TokenBudgetLoader, load_chars, load_sequences


def _sequences(lengths: list[int]) -> SequenceDataset:
    # sequence i is i + 1 repeated, so a batch's inputs say which items it holds
    return SequenceDataset([np.full(n + 1, i + 1, dtype=np.int64) for i, n in enumerate(lengths)],
                           [str(i) for i in range(len(lengths) + 1)])


LENGTHS = [3, 9, 4, 1, 7, 7, 2, 8, 5, 3, 6, 2]


def test_each_micro_batch_fits_the_budget_once_padded_and_the_next_item_would_not() -> None:
    data = _sequences(LENGTHS)
    loader = TokenBudgetLoader(data, max_tokens=16, seed=3)
    rows = []
    for index in range(len(loader)):
        inputs, _ = loader.batch(0, index)
        assert inputs.shape[0] * inputs.shape[1] <= 16  # rows x the longest of this micro-batch
        rows.append(inputs.shape[0])
    assert len(set(rows)) > 1  # uneven: short sequences travel many to a micro-batch
    cut = loader.micro_batches  # in cut order (by length): adding the next cut's first item would overflow
    for batch, following in itertools.pairwise(cut):
        longest = max(int(data.lengths[following[0]]), int(data.lengths[batch].max()))
        assert (len(batch) + 1) * longest > 16


def test_every_item_once_an_epoch_the_same_micro_batches_in_an_order_of_the_seed_and_epoch() -> None:
    data = _sequences(LENGTHS)
    loader = TokenBudgetLoader(data, max_tokens=16, seed=3)
    for epoch in range(3):
        assert sorted(loader.order(epoch).tolist()) == list(range(len(LENGTHS)))
        held = [sorted(int(v) - 1 for v in x[:, 0]) for x, _ in loader.batches(epoch)]
        assert held == [sorted(loader.indices(epoch, i).tolist()) for i in range(len(loader))]
    sets = [{tuple(sorted(loader.indices(epoch, i).tolist())) for i in range(len(loader))} for epoch in range(3)]
    assert sets[0] == sets[1] == sets[2]  # the cut is made once
    assert loader.order(0).tolist() != loader.order(1).tolist()  # the order is the epoch's
    again = TokenBudgetLoader(data, max_tokens=16, seed=3)
    assert again.order(1).tolist() == loader.order(1).tolist()
    plain = TokenBudgetLoader(data, max_tokens=16, shuffle=False)
    assert plain.order(0).tolist() == plain.order(5).tolist()


def test_the_builtin_sequences_and_chunks_say_their_lengths() -> None:
    sequences = load_sequences()
    assert sequences.lengths.tolist() == [len(s) - 1 for s in sequences.sequences]
    chars = load_chars(16)
    loader = TokenBudgetLoader(chars, max_tokens=64)
    assert len(loader) == -(-len(chars) // 4) and loader.batch(0, 0)[0].shape == (4, 16)
    assert loader.batch_size is None and loader.max_tokens == 64


def test_refusals_name_the_item_the_budget_and_the_missing_lengths() -> None:
    with pytest.raises(ValueError, match=r"^TokenBudgetLoader: item 1 holds 9 tokens, more than the budget of "
                                         r"max_tokens=8 \(1 of the 12 items are longer\): raise the budget or "
                                         r"cut them$"):
        TokenBudgetLoader(_sequences(LENGTHS), max_tokens=8)
    with pytest.raises(ValueError, match=r"^TokenBudgetLoader: a ArrayDataset does not say how many tokens each "
                                         r"item holds \(no \.lengths\): pass lengths=, one count per item$"):
        TokenBudgetLoader(ArrayDataset(np.zeros((4, 2))), max_tokens=8)
    with pytest.raises(ValueError, match=r"^TokenBudgetLoader: lengths must be one positive int per item \(4\)"):
        TokenBudgetLoader(ArrayDataset(np.zeros((4, 2))), max_tokens=8, lengths=[1, 2, 3])
    with pytest.raises(ValueError, match=r"^TokenBudgetLoader: max_tokens must be a positive int, got 0$"):
        TokenBudgetLoader(_sequences(LENGTHS), max_tokens=0)
    with pytest.raises(IndexError, match=r"batch 99 of an epoch of"):
        TokenBudgetLoader(_sequences(LENGTHS), max_tokens=16).batch(0, 99)

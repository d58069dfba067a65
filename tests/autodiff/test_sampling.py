"""mta.multinomial: PyTorch's shapes and rules, draws from the library's seeded generator."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta


def test_a_seed_gives_the_same_draws_and_another_seed_others() -> None:
    weights = mta.tensor([0.1, 0.2, 0.3, 0.4])
    mta.manual_seed(3)
    first = mta.multinomial(weights, 50, replacement=True).tolist()
    mta.manual_seed(3)
    assert mta.multinomial(weights, 50, replacement=True).tolist() == first
    mta.manual_seed(4)
    assert mta.multinomial(weights, 50, replacement=True).tolist() != first
    own = np.random.default_rng(3)
    assert mta.multinomial(weights, 50, True, generator=own).tolist() == \
        mta.multinomial(weights, 50, True, generator=np.random.default_rng(3)).tolist()


def test_draws_follow_the_weights_which_need_not_add_up_to_one() -> None:
    weights = mta.tensor([1.0, 0.0, 3.0], dtype="float64")  # 1/4, 0, 3/4
    drawn = mta.multinomial(weights, 20000, replacement=True, generator=np.random.default_rng(0)).numpy()
    assert drawn.dtype == np.int64 and drawn.shape == (20000,)
    counts = np.bincount(drawn, minlength=3) / drawn.size
    assert counts[1] == 0.0
    # 20000 draws: the standard error of a frequency of 1/4 is 0.003, so 0.02 is over six of them
    np.testing.assert_allclose(counts, [0.25, 0.0, 0.75], atol=0.02)


def test_without_replacement_every_index_comes_once_per_row() -> None:
    weights = mta.tensor(np.array([[5.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 2.0]]))
    drawn = mta.multinomial(weights, 3, generator=np.random.default_rng(1)).numpy()
    assert drawn.shape == (2, 3)
    for row in drawn:
        assert len(set(row.tolist())) == 3
    assert 0 not in drawn[1]  # a zero weight is never drawn
    full = mta.multinomial(mta.ones(4), 4, generator=np.random.default_rng(2)).tolist()
    assert sorted(full) == [0, 1, 2, 3]


def test_bad_weights_and_counts_are_refused_with_pytorchs_rules() -> None:
    with pytest.raises(ValueError, match="cannot draw 4 samples without replacement from 3 categories"):
        mta.multinomial(mta.ones(3), 4)
    with pytest.raises(ValueError, match=r"row 0 has 1 non-zero weight\(s\), too few for 2 samples"):
        mta.multinomial(mta.tensor([0.0, 1.0, 0.0]), 2)
    with pytest.raises(ValueError, match="the weights of row 1 add up to 0"):
        mta.multinomial(mta.tensor([[1.0, 1.0], [0.0, 0.0]]), 1)
    with pytest.raises(ValueError, match="finite and non-negative"):
        mta.multinomial(mta.tensor([1.0, -0.5]), 1)
    with pytest.raises(ValueError, match="finite and non-negative"):
        mta.multinomial(mta.tensor([1.0, float("nan")]), 1)
    with pytest.raises(ValueError, match="num_samples must be a positive int, got 0"):
        mta.multinomial(mta.ones(3), 0)
    with pytest.raises(ValueError, match=r"weights must have 1 or 2 axes, got shape \(1, 1, 2\)"):
        mta.multinomial(mta.ones(1, 1, 2), 1)
    with pytest.raises(TypeError, match="needs float weights, got a tensor of int64"):
        mta.multinomial(mta.arange(3), 1)

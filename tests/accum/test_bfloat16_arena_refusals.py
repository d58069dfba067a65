"""What a bfloat16 arena refuses, said in full, and the defaults its stochastic stream starts from
(survivors of the accum layer's mutation run: the refusals' words, the seed's bounds, a store's own
count of its windows went unread)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from minitorch_accum.accum import Accumulator, ArenaStore
from tests.accum.helpers import SIZES, data, mlp, split, summed_loss


def _named():
    return list(mlp("float32").named_parameters())


def test_the_refusals_are_said_in_full() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "ArenaStore: rounding='stochastic' rounds the sums of a bfloat16 arena; a float32 arena rounds every "
            "add to nearest (accum_dtype='bfloat16')")):
        ArenaStore(_named(), "float32", rounding="stochastic")
    with pytest.raises(ValueError, match=re.escape(
            "ArenaStore: a bfloat16 arena has no Neumaier compensation (its sums round to bfloat16); compensate a "
            "float32 arena, or round a bfloat16 one stochastically")):
        ArenaStore(_named(), "bfloat16", compensated=True)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Accumulator(mlp("float32"), steps=2, fusion="none", accum_dtype="bfloat16"),
     "a bfloat16 arena (and its rounding) needs an arena: use fusion='leaf' or 'gemm'"),
    (lambda: Accumulator(mlp("float32"), steps=2, fusion="none", rounding="stochastic"),
     "a bfloat16 arena (and its rounding) needs an arena: use fusion='leaf' or 'gemm'"),
    (lambda: Accumulator(mlp("float32"), steps=2, accum_dtype="bfloat16", reducer=object()),  # refused before use
     "data-parallel accumulation into a bfloat16 arena is not supported: the collective would sum the ranks' "
     "bfloat16 buffers rounded to nearest; accumulate in float32"),
], ids=["bfloat16-none", "stochastic-none", "bfloat16-reducer"])
def test_an_accumulator_refuses_with_these_words_and_no_others(make, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        make()
    assert str(refused.value) == message


def _saved_window(rounding: str) -> dict:
    model = mlp("float32")
    acc = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding=rounding)
    x, y = data()
    acc.backward(summed_loss(model, x[:3], y[:3], "float32"), num_items=3)
    return acc.state_dict()


@pytest.mark.parametrize(("saved", "loading"), [("stochastic", "nearest"), ("nearest", "stochastic")])
def test_a_checkpoint_of_the_other_rounding_is_refused_naming_both(saved: str, loading: str) -> None:
    state = _saved_window(saved)
    acc = Accumulator(mlp("float32"), steps=4, accum_dtype="bfloat16", rounding=loading)
    with pytest.raises(ValueError) as refused:
        acc.load_state_dict(state)
    assert str(refused.value) == f"accumulator state was saved with rounding={saved!r}, this store rounds {loading!r}"


@pytest.mark.parametrize("seed", [True, -1, 2**64, 1.5])
def test_a_rounding_seed_outside_64_bits_or_not_an_int_is_refused(seed: object) -> None:
    with pytest.raises(ValueError, match=re.escape(
            f"ArenaStore: rounding_seed must be an int in [0, 2**64), got {seed!r}")):
        ArenaStore(_named(), "bfloat16", rounding="stochastic", rounding_seed=seed)  # type: ignore[arg-type]


def test_the_largest_seed_is_taken() -> None:
    assert ArenaStore(_named(), "bfloat16", rounding="stochastic", rounding_seed=2**64 - 1).rounding_seed == 2**64 - 1
    assert ArenaStore(_named(), "bfloat16", rounding="stochastic", rounding_seed=np.uint64(7)).rounding_seed == 7


def _stochastic_bits(**seed: int) -> np.ndarray:
    model = mlp("float32")
    acc = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", **seed)
    x, y = data()
    for sl in split(len(y), SIZES):
        acc.backward(summed_loss(model, x[sl], y[sl], "float32"), num_items=sl.stop - sl.start)
    return acc.arena.buffer.view(np.uint16).copy()


def test_the_default_rounding_seed_is_0() -> None:
    default = _stochastic_bits()
    assert np.array_equal(default, _stochastic_bits(rounding_seed=0))
    assert not np.array_equal(default, _stochastic_bits(rounding_seed=1))


def test_a_store_on_its_own_counts_its_windows_from_0_and_draws_as_an_accumulator_does() -> None:
    # without an accumulator to say the window's index, an ArenaStore counts its windows itself (reset)
    model = mlp("float32")
    store = ArenaStore(list(model.named_parameters()), "bfloat16", rounding="stochastic")
    assert (store.rounding_seed, store.window_index) == (0, 0)
    acc = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic")
    x, y = data()
    for window in range(3):
        assert store.window_index == acc.window_index == window
        for sl in split(len(y), SIZES):
            store.micro_batch(summed_loss(model, x[sl], y[sl], "float32"), None, 1.0)
            acc.backward(summed_loss(model, x[sl], y[sl], "float32"), num_items=sl.stop - sl.start)
        assert store.state_meta()["rounding"]["window"] == window
        assert np.array_equal(store.arena.buffer.view(np.uint16), acc.arena.buffer.view(np.uint16))
        store.reset()
        acc.zero()

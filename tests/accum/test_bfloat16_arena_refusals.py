"""What a bfloat16 arena refuses, said in full, and the defaults its stochastic stream starts from
(survivors of the accum layer's mutation run: the refusals' words and the seed's bounds went unread)."""

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
    with pytest.raises(ValueError, match=re.escape(
            "a bfloat16 arena (and its rounding) needs an arena: use fusion='leaf' or 'gemm'")):
        Accumulator(mlp("float32"), steps=2, fusion="none", accum_dtype="bfloat16")


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

"""The ArenaStore's facts about a window (norm, GEMM bounds, which views were written) and what
data parallelism builds on them: on thread ranks, every rank ends with the global window."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator, ArenaStore
from minitorch_accum.distributed import DataParallel
from minitorch_accum.distributed.zero import ZeroRedundancy
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import run_ranks
from tests.accum.helpers import data, max_difference, mlp, split, summed_loss, window_grads


class TwoHeads(nn.Module):
    """Either head answers, so a window may leave one head's gradient unwritten."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.a = nn.Linear(5, 3, dtype="float64", rng=rng)
        self.b = nn.Linear(5, 3, dtype="float64", rng=rng)
        self.use_b = True

    def forward(self, t):
        return self.b(t) if self.use_b else self.a(t)


def test_a_store_with_nothing_written_has_norm_zero_and_no_bounds() -> None:
    model = mlp()
    store = ArenaStore(list(model.named_parameters()))
    assert store.norm() == 0.0
    assert store.views() == []
    np.testing.assert_array_equal(store.written_mask(), 0)
    np.testing.assert_array_equal(store.gemm_bounds(), 0.0)


@pytest.mark.parametrize("fuse_gemm", [False, True], ids=["leaf", "gemm"])
def test_gemm_bounds_are_positive_exactly_where_a_gemm_wrote(fuse_gemm: bool) -> None:
    model = mlp()
    x, y = data()
    store = ArenaStore(list(model.named_parameters()), "float64", fuse_gemm=fuse_gemm)
    store.micro_batch(summed_loss(model, x[:4], y[:4], "float64"), None, 1.0)
    bounds = store.gemm_bounds()
    assert bounds.dtype == np.float64
    gemm_written = [fuse_gemm and name.endswith("weight") for name, _ in model.named_parameters()]
    assert [bool(b > 0) for b in bounds] == gemm_written
    np.testing.assert_array_equal(bounds[~np.array(gemm_written)], 0.0)


def test_the_written_masks_of_several_ranks_add_up_to_how_many_wrote_each_parameter() -> None:
    model = TwoHeads()
    x, y = data()
    named = list(model.named_parameters())
    masks = []
    for use_b in (True, True, False):
        model.use_b = use_b
        store = ArenaStore(named, "float64")
        store.micro_batch(summed_loss(model, x[:4], y[:4], "float64"), None, 1.0)
        masks.append(store.written_mask())
    counts = dict(zip([n for n, _ in named], sum(masks), strict=True))
    assert counts == {"a.weight": 1, "a.bias": 1, "b.weight": 2, "b.bias": 2}


def test_adopting_facts_for_another_number_of_parameters_is_refused() -> None:
    store = ArenaStore(list(mlp().named_parameters()))
    with pytest.raises(ValueError, match="zip"):
        store.adopt(np.ones(3, np.int64), np.zeros(4), nonfinite=False)
    with pytest.raises(ValueError, match="zip"):
        store.adopt(np.ones(4, np.int64), np.zeros(5), nonfinite=False)


@pytest.mark.parametrize("compensated", [False, True], ids=["plain", "compensated"])
def test_views_left_from_an_earlier_window_add_nothing_to_the_global_window(compensated: bool) -> None:
    x, y = data()
    first, second = split(len(y), (13, 14))

    def rank(comm):
        model = TwoHeads()
        acc = Accumulator(model, steps=1, fusion="leaf", accum_dtype="float64", compensated=compensated,
                          reducer=DataParallel(comm))
        model.use_b = True  # window 0: both ranks write head b
        acc.backward(summed_loss(model, 100.0 * x[first], y[first], "float64"), num_items=13)
        acc.grads()
        acc.zero()
        model.use_b = comm.rank == 1  # window 1: rank 0 writes head a only, rank 1 head b only
        acc.backward(summed_loss(model, x[second], y[second], "float64"), num_items=14)
        return window_grads(acc, model)

    expected_model = TwoHeads()
    alone = Accumulator(expected_model, steps=2, fusion="leaf", accum_dtype="float64", compensated=compensated)
    for use_b in (False, True):
        expected_model.use_b = use_b
        alone.backward(summed_loss(expected_model, x[second], y[second], "float64"), num_items=14)
    expected = window_grads(alone, expected_model)
    for got in run_ranks(2, rank):
        assert max_difference(got, expected) <= 1e-15


def test_a_non_finite_gradient_on_one_rank_skips_the_window_on_every_rank() -> None:
    x, y = data()

    def rank(comm):
        model = mlp()
        acc = Accumulator(model, steps=1, fusion="leaf", accum_dtype="float64", reducer=DataParallel(comm))
        inputs = x.copy()
        if comm.rank == 1:
            inputs[0, 0] = np.nan
        acc.backward(summed_loss(model, inputs[:4], y[:4], "float64"), num_items=4)
        return acc.found_nonfinite()

    assert run_ranks(2, rank) == [True, True]


def test_zero_1_gives_every_rank_the_global_norm_and_on_request_the_whole_global_gradient() -> None:
    x, y = data()
    parts = split(len(y), (7, 1, 16, 3))

    def rank(comm):
        model = mlp()
        acc = Accumulator(model, steps=2, accum_dtype="float64", reducer=ZeroRedundancy(comm))
        for part in parts[2 * comm.rank:2 * comm.rank + 2]:
            acc.backward(summed_loss(model, x[part], y[part], "float64"), num_items=len(y[part]))
        return acc.grad_norm(), window_grads(acc, model)

    model = mlp()
    alone = Accumulator(model, steps=4, accum_dtype="float64")
    for part in parts:
        alone.backward(summed_loss(model, x[part], y[part], "float64"), num_items=len(y[part]))
    norm = alone.grad_norm()
    expected = window_grads(alone, model)
    for got_norm, got in run_ranks(2, rank):
        assert got_norm == pytest.approx(norm, rel=1e-14)
        assert max_difference(got, expected) <= 1e-15


def test_zero_1_finds_an_overflow_only_a_gemm_wrote_on_every_rank() -> None:
    """The overflowing weight lies in rank 0's shard: rank 1 learns of it only from the agreement."""

    def rank(comm):
        layer = nn.Linear(4, 2, bias=False)
        acc = Accumulator(layer, steps=1, fusion="gemm", reducer=ZeroRedundancy(comm))
        magnitude = 1e38 if comm.rank == 0 else 1.0
        acc.backward(layer(mta.tensor(np.full((8, 4), magnitude), dtype="float32")).sum(), num_items=8)
        return acc.found_nonfinite()

    assert run_ranks(2, rank) == [True, True]


def test_zero_1_has_no_gradient_window_and_says_what_to_step_with() -> None:
    def rank(comm):
        model = mlp()
        acc = Accumulator(model, steps=1, reducer=ZeroRedundancy(comm))
        x, y = data()
        acc.backward(F.cross_entropy(model(mta.tensor(x[:3])), y[:3], reduction="sum"), num_items=3)
        with pytest.raises(TypeError, match=r"^gradient_window: with ZeRO-1 each rank holds only its shard of the "
                                            r"gradient; step with minitorch_accum\.distributed\."
                                            r"ZeroRedundancyOptimizer$"):
            acc.gradient_window()

    run_ranks(1, rank)

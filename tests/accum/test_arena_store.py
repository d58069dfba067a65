"""The ArenaStore's facts about a window (norm, GEMM bounds, which views were written) and what
data parallelism builds on them: on thread ranks, every rank ends with the global window."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator, ArenaStore
from minitorch_accum.autodiff import run_backward
from minitorch_accum.backend import NumpyBackend
from minitorch_accum.distributed import DataParallel
from minitorch_accum.distributed.zero import ZeroRedundancy
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import run_ranks
from tests.accum.helpers import (
    PassRecorder,
    TwoHeads,
    data,
    max_difference,
    mlp,
    split,
    summed_loss,
    window_grads,
)


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
    assert {m.dtype for m in masks} == {np.dtype(np.int64)}  # what the ranks sum with one int64 allreduce
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


# ----------------------------------------------------------- the store used on its own
def test_by_default_a_store_sums_in_float32_lets_gemms_write_and_pads_for_one_rank() -> None:
    model = mlp("float32", hidden=7)  # 99 elements: one rank pads them to 112, two ranks to 128
    x, y = data()
    named = list(model.named_parameters())
    store = ArenaStore(named)
    assert store.arena.accum_dtype == np.float32
    assert store.nbytes == ArenaStore(named, shards=1).nbytes < ArenaStore(named, shards=2).nbytes
    store.micro_batch(summed_loss(model, x[:4], y[:4], "float32"), None, 1.0)
    assert [bool(b > 0) for b in store.gemm_bounds()] == [n.endswith("weight") for n, _ in named]


def test_a_float64_store_sums_float32_gradients_in_float64() -> None:
    model = mlp("float32")
    x, y = data()
    store = ArenaStore(list(model.named_parameters()), "float64", fuse_gemm=False)
    for part in split(len(y), (7, 1, 16, 3)):
        store.micro_batch(summed_loss(model, x[part], y[part], "float32"), None, 1.0)
    assert {v.dtype for _, v in store.views()} == {np.dtype(np.float64)}
    expected = {name: np.zeros(p.shape) for name, p in model.named_parameters()}
    for part in split(len(y), (7, 1, 16, 3)):
        grads = summed_loss(model, x[part], y[part], "float32").backward()
        for name, p in model.named_parameters():
            expected[name] += np.asarray(grads[p], dtype=np.float64)
    got = {name: np.asarray(v) for (p, v), (name, _) in zip(store.views(), model.named_parameters(), strict=True)}
    assert max_difference(got, expected) <= 1e-12  # float32 sums would be off by ~1e-6


def test_a_store_used_directly_as_the_sink_of_backward_adds_gradients_unscaled() -> None:
    model = mlp("float64")
    x, y = data()
    store = ArenaStore(list(model.named_parameters()), "float64", fuse_gemm=False)
    run_backward(summed_loss(model, x[:5], y[:5], "float64"), None, sink=store)
    grads = summed_loss(model, x[:5], y[:5], "float64").backward()
    for p, view in store.views():
        np.testing.assert_allclose(view, grads[p], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize(("accum_dtype", "dtype", "compensated", "kernels"), [
    ("float64", "float64", False, ["copy_scale", "add_scale"]),
    ("float32", "float16", False, ["cast_copy_scale", "cast_add_scale"]),
    ("float32", "float32", True, ["copy_scale_compensated", "add_scale_compensated"]),
], ids=["plain", "16-bit", "compensated"])
def test_a_write_copies_first_then_adds_and_names_the_kernel_it_ran(accum_dtype: str, dtype: str, compensated: bool,
                                                                     kernels: list[str]) -> None:
    layer = nn.Linear(3, 2, bias=False, dtype=dtype)
    (param,) = layer.parameters()
    store = ArenaStore(list(layer.named_parameters()), accum_dtype, compensated=compensated, fuse_gemm=False)
    grad = np.arange(12, dtype=dtype).reshape(3, 4)[:, ::2]  # not contiguous: the store makes it so
    assert [store.add(param, grad), store.add(param, 2 * grad)] == kernels
    ((_, view),) = store.views()
    np.testing.assert_array_equal(view, 3 * grad.astype(accum_dtype))


def test_a_gemm_write_names_beta_0_then_beta_1_and_writes_the_product() -> None:
    layer = nn.Linear(3, 2, bias=False, dtype="float64")
    (param,) = layer.parameters()
    store = ArenaStore(list(layer.named_parameters()), "float64")
    a, b = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(4, 2)
    assert [store.add_product(param, a, b), store.add_product(param, a, b)] == ["gemm-beta0", "gemm-beta1"]
    np.testing.assert_array_equal(store.views()[0][1], 2 * (a @ b))


class _NoBlas(NumpyBackend):
    """A backend no BLAS call of which can write a view (as for a dtype BLAS has no GEMM of)."""

    def gemm_into(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float, beta: float) -> bool:
        return self._gemm_fallback(a, b, out, alpha, beta)


def test_a_gemm_write_the_backend_had_to_fall_back_for_is_named_so_and_still_sums() -> None:
    param = mta.Tensor(np.zeros((3, 2)), requires_grad=True, _backend=_NoBlas())
    store = ArenaStore([("weight", param)], "float64")
    a, b = np.arange(12.0).reshape(3, 4), np.arange(8.0).reshape(4, 2)
    assert [store.add_product(param, a, b), store.add_product(param, a, b)] == ["gemm-fallback", "gemm-fallback"]
    np.testing.assert_array_equal(store.views()[0][1], 2 * (a @ b))


def test_each_pass_over_the_window_is_announced_to_the_recorder_with_what_it_covers() -> None:
    model = mlp("float32")
    x, y = data()
    store = ArenaStore(list(model.named_parameters()), compensated=True)
    store.recorder = PassRecorder()
    store.micro_batch(summed_loss(model, x[:4], y[:4], "float32"), None, 1.0)
    names = [n for n, _ in model.named_parameters()]
    assert store.recorder.passes == []  # the writes of a micro-batch are no pass: they are seen through a sink
    store.close()
    store.scale_in_place(0.5)
    assert store.recorder.passes == [([(n, "fold_compensation") for n in names], True),
                                     ([(n, "scale") for n in names], True)]


def test_a_gemm_bound_is_the_scale_times_the_factors_norms_summed_over_micro_batches() -> None:
    # a wide layer, few rows: the factors (rows x (64 + 32)) are a smaller read than the view (64 x 32)
    layer = nn.Linear(64, 32, bias=False, dtype="float64", rng=np.random.default_rng(0))
    x = np.random.default_rng(1).normal(size=(10, 64))
    store = ArenaStore(list(layer.named_parameters()), "float64")
    expected = 0.0
    for part, scale in ((slice(0, 3), 0.5), (slice(3, 10), -2.0)):
        store.micro_batch(layer(mta.tensor(x[part])).sum(), None, scale)  # dW = x^T @ ones
        rows = part.stop - part.start
        expected += abs(scale) * np.linalg.norm(x[part]) * np.sqrt(rows * 32)
        assert store.gemm_bounds()[0] == pytest.approx(expected, rel=1e-13)
    ((param, view),) = store.views()
    assert store.bound_is_safe(param, view)


@pytest.mark.parametrize("rows", [21, 40])
def test_where_the_factors_are_the_larger_read_no_bound_is_kept_and_the_view_is_read(rows: int) -> None:
    # 64 x 32 = 2048 view elements; the factors hold rows x 96: 2016 at 21 rows (a bound), 3840 at 40
    layer = nn.Linear(64, 32, bias=False, dtype="float64", rng=np.random.default_rng(0))
    store = ArenaStore(list(layer.named_parameters()), "float64")
    store.recorder = PassRecorder()
    store.micro_batch(layer(mta.tensor(np.ones((rows, 64)))).sum(), None, 1.0)
    store.micro_batch(layer(mta.tensor(np.ones((3, 64)))).sum(), None, 1.0)  # a bound added to inf is inf
    ((param, view),) = store.views()
    assert store.bound_is_safe(param, view) is (rows == 21)
    assert bool(store.gemm_bounds()[0] == np.inf) is (rows == 40)
    assert store.finite_check() is True
    read = [names for names, _ in store.recorder.passes if names == [("weight", "finite_check")]]
    assert len(read) == (rows == 40)
    np.testing.assert_array_equal(view, np.full((64, 32), rows + 3.0))


def test_a_gemm_view_its_bound_cannot_prove_finite_is_read_and_found_finite() -> None:
    """Rows +M and -M cancel: the gradient is 0 while the bound is ~1.1 M, above float64 max / 4."""
    layer = nn.Linear(4, 2, bias=False, dtype="float64", rng=np.random.default_rng(0))
    x = np.full((2, 4), 2e307)
    x[1] *= -1
    store = ArenaStore(list(layer.named_parameters()), "float64")
    store.micro_batch(layer(mta.tensor(x)).sum(), None, 1.0)
    ((param, view),) = store.views()
    assert not store.bound_is_safe(param, view)
    assert store.finite_check() is True
    acc = Accumulator(layer, steps=1, fusion="gemm", accum_dtype="float64")
    acc.backward(layer(mta.tensor(x)).sum(), num_items=2)
    assert acc.found_nonfinite() is False


def overflowed_gemm_store() -> tuple[list, ArenaStore]:
    """A float32 GEMM sum 3 x 1.2e38 that overflowed just past float32's max (3.4e38), under a bound
    (a layer of 8 x 8 weights, its gradient from 3 rows: the factors are the smaller read)."""
    layer = nn.Linear(8, 8, bias=False)
    layer.weight.data[...] = 0.5
    named = list(layer.named_parameters())
    store = ArenaStore(named)
    x = np.zeros((3, 8))
    x[:, 0] = 1.2e38
    store.micro_batch(layer(mta.tensor(x, dtype="float32")).sum(), None, 1.0)  # dW[0, j] = 3.6e38
    # ||x||_F ||ones||_F (1.2e38 is 1.19999998e38 in float32)
    assert store.gemm_bounds()[0] == pytest.approx(float(np.float32(1.2e38)) * np.sqrt(3) * np.sqrt(24), rel=1e-6)
    return named, store


def test_a_gemm_overflow_just_past_the_dtype_maximum_is_found() -> None:
    _, store = overflowed_gemm_store()
    assert store.finite_check() is False


def test_a_resumed_store_keeps_the_gemm_bounds_that_make_it_read_an_overflow() -> None:
    named, saved = overflowed_gemm_store()
    resumed = ArenaStore(named)
    resumed.load(saved.state_meta(), saved.state_arrays())
    np.testing.assert_array_equal(resumed.gemm_bounds(), saved.gemm_bounds())
    assert resumed.finite_check() is False


def test_a_gemm_bound_is_trusted_only_below_a_quarter_of_the_dtype_maximum() -> None:
    model = mlp("float32")
    store = ArenaStore(list(model.named_parameters()))
    quarter = float(np.finfo(np.float32).max) / 4
    store.adopt(np.ones(4, np.int64), np.array([quarter, np.nextafter(quarter, 0.0), 1e30, 0.0]), nonfinite=False)
    safe = [store.bound_is_safe(p, v) for p, v in store.views()]
    assert safe == [False, True, True, True]


def test_adopted_facts_become_the_stores_own_and_its_checkpoints() -> None:
    model = mlp("float64")
    names = [n for n, _ in model.named_parameters()]
    store = ArenaStore(list(model.named_parameters()), "float64")
    store.adopt(np.array([1, 0, 1, 0], np.int64), np.array([0.5, 0.0, np.inf, 0.0]), nonfinite=False)
    np.testing.assert_array_equal(store.written_mask(), [1, 0, 1, 0])
    np.testing.assert_array_equal(store.gemm_bounds(), [0.5, 0.0, np.inf, 0.0])
    # no inf in the record (JSON has none): the views the window's end reads are listed
    assert store.state_meta() == {"written": [names[0], names[2]], "gemm_bound": {names[0]: 0.5},
                                  "gemm_unbounded": [names[2]], "flag": 0}
    resumed = ArenaStore(list(model.named_parameters()), "float64")
    resumed.load(store.state_meta(), store.state_arrays())
    np.testing.assert_array_equal(resumed.gemm_bounds(), [0.5, 0.0, np.inf, 0.0])
    older = {key: value for key, value in store.state_meta().items() if key != "gemm_unbounded"}
    resumed.load(older, store.state_arrays())  # a state saved before the list was kept
    np.testing.assert_array_equal(resumed.gemm_bounds(), [0.5, 0.0, 0.0, 0.0])
    assert store.finite_check() is True
    store.adopt(np.array([1, 0, 1, 0], np.int64), np.zeros(4), nonfinite=True)
    assert store.state_meta()["flag"] == 1
    assert store.finite_check() is False


def test_a_clean_window_on_every_rank_is_found_finite_on_every_rank() -> None:
    x, y = data()

    def rank(comm):
        model = mlp()
        acc = Accumulator(model, steps=1, fusion="gemm", accum_dtype="float64", reducer=DataParallel(comm))
        acc.backward(summed_loss(model, x[4 * comm.rank:4 * comm.rank + 4], y[:4], "float64"), num_items=4)
        return acc.found_nonfinite()

    assert run_ranks(2, rank) == [False, False]


def test_closing_a_compensated_window_twice_folds_the_compensation_once() -> None:
    model = mlp("float32")
    x, y = data()
    store = ArenaStore(list(model.named_parameters()), compensated=True)
    for part in split(len(y), (7, 1, 16, 3)):
        store.micro_batch(summed_loss(model, 1e3 * x[part], y[part], "float32"), None, 1.0)
    assert any(np.any(store.compensation.view(p) != 0) for p in store.params)  # there is something to fold
    sums = [np.array(v) for _, v in store.views()]
    terms = [np.array(store.compensation.view(p)) for p, _ in store.views()]
    store.close()
    once = [np.array(v) for _, v in store.views()]
    for total, term, folded in zip(sums, terms, once, strict=True):
        np.testing.assert_array_equal(folded, total + term)  # each term added once, as it is
    store.close()
    for before, (_, after) in zip(once, store.views(), strict=True):
        np.testing.assert_array_equal(after, before)


def test_loading_a_state_that_names_unknown_parameters_is_refused_and_changes_nothing() -> None:
    model = mlp("float64")
    x, y = data()
    store = ArenaStore(list(model.named_parameters()), "float64")
    store.micro_batch(summed_loss(model, x[:4], y[:4], "float64"), None, 1.0)
    meta, arrays = store.state_meta(), store.state_arrays()
    kept = {k: np.array(v) for k, v in arrays.items()}
    bad_meta = {**meta, "written": [*meta["written"], "ghost"], "gemm_bound": {**meta["gemm_bound"], "ghost": 1.0,
                                                                                "a.ghost": 2.0}}
    bad_arrays = {k: np.zeros_like(v) for k, v in arrays.items()}
    with pytest.raises(ValueError, match=r"^accumulator state names unknown parameters: a\.ghost, ghost$"):
        store.load(bad_meta, bad_arrays)
    assert store.state_meta() == meta
    for key, value in store.state_arrays().items():
        np.testing.assert_array_equal(value, kept[key])

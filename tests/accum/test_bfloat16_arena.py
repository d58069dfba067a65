"""A bfloat16 gradient arena: half the bytes, each sum rounded to nearest or stochastically; the
stochastic stream keyed by (seed, window, the view's draw, the element's offset in the arena), so
a window replays and resumes mid-window bit for bit; and what it refuses."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum import kernels, nn
from minitorch_accum.accum import Accumulator, ArenaStore
from minitorch_accum.kernels.dtypes import BFLOAT16
from tests.accum.helpers import SIZES, data, mlp, split, summed_loss


def _window(acc: Accumulator, model: nn.Module, windows: int = 1, start: int = 0) -> None:
    """Accumulate ``windows`` windows of the SIZES micro-batches (from micro-batch ``start`` of the first)."""
    x, y = data()
    for w in range(windows):
        for sl in split(len(y), SIZES)[start if w == 0 else 0:]:
            acc.backward(summed_loss(model, x[sl], y[sl], "float32"), num_items=sl.stop - sl.start)
        if w + 1 < windows:
            acc.zero()


def _bits(acc: Accumulator) -> np.ndarray:
    return acc.arena.buffer.view(np.uint16).copy()


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_a_bfloat16_arena_takes_half_the_bytes_and_writes_each_sum_by_its_kernel(rounding: str) -> None:
    model = mlp("float32")
    wide = Accumulator(mlp("float32"), steps=4, fusion="leaf")
    acc = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding=rounding, trace=True)
    assert acc.arena.buffer.dtype == BFLOAT16
    views, wide_views = ([arena.view(p).nbytes for p in arena.params] for arena in (acc.arena, wide.arena))
    assert 2 * sum(views) == sum(wide_views) and acc.store.nbytes < wide.store.nbytes  # the lines pad alike
    assert acc.store.fuses_gemm is False  # BLAS cannot write bfloat16: the kernel rounds every weight gradient
    _window(acc, model)
    written = {e.kernel for e in acc.trace.events if e.param}
    expected = {"copy_scale_stochastic", "add_scale_stochastic"} if rounding == "stochastic" else \
        {"copy_scale", "add_scale"}
    assert written == expected


def test_the_window_replays_from_its_key_seed_window_draw_and_offset() -> None:
    # the arena's bits are those of the kernels called on each micro-batch's own gradients with
    # (seed, window index, draw = the micro-batch's index in the window, offset = the view's place)
    model = mlp("float32")
    acc = Accumulator(model, steps=4, fusion="leaf", accum_dtype="bfloat16", rounding="stochastic", rounding_seed=77)
    _window(acc, model, windows=2)  # the second window: index 1
    x, y = data()
    replay = np.zeros_like(acc.arena.buffer)
    for draw, sl in enumerate(split(len(y), SIZES)):
        grads = summed_loss(model, x[sl], y[sl], "float32").backward()
        for param in model.parameters():
            _, offset, size = acc.arena.span(param)
            write = kernels.copy_scale_stochastic if draw == 0 else kernels.add_scale_stochastic
            write(replay[offset:offset + size].reshape(param.shape), np.asarray(grads[param]), 1.0, 77, 1, draw,
                  offset)
    assert np.array_equal(_bits(acc), replay.view(np.uint16))


def test_the_same_seed_gives_the_same_bits_and_another_seed_others() -> None:
    runs = {}
    for seed in (3, 3, 4):
        model = mlp("float32")
        acc = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=seed)
        _window(acc, model, windows=2)
        runs.setdefault(seed, []).append(_bits(acc))
    assert np.array_equal(runs[3][0], runs[3][1])
    assert not np.array_equal(runs[3][0], runs[4][0])


def test_a_window_resumed_mid_way_is_bit_identical() -> None:
    model = mlp("float32")
    whole = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=9)
    _window(whole, model, windows=2)
    # the same two windows, the second stopped after two micro-batches, saved, loaded into a new accumulator
    first = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=9)
    _window(first, model)
    first.zero()
    x, y = data()
    for sl in split(len(y), SIZES)[:2]:
        first.backward(summed_loss(model, x[sl], y[sl], "float32"), num_items=sl.stop - sl.start)
    state = first.state_dict()
    # the stream's state as the checkpoint holds it: its mode, seed, window and each view's draws so far
    assert state["meta"]["store"]["rounding"] == {"mode": "stochastic", "seed": 9, "window": 1,
                                                  "draws": {name: 2 for name, _ in model.named_parameters()}}
    resumed = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=9)
    resumed.load_state_dict(state)
    _window(resumed, model, start=2)
    assert resumed.window_index == whole.window_index == 1
    assert np.array_equal(_bits(resumed), _bits(whole))


def test_a_window_resumed_at_its_start_draws_from_its_own_index() -> None:
    # a state saved between windows carries no stream: the resumed store must take the window's index
    # from the accumulator, not count its own windows from the load
    model = mlp("float32")
    whole = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=5)
    _window(whole, model, windows=3)
    first = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=5)
    _window(first, model, windows=2)
    first.zero()
    resumed = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic", rounding_seed=5)
    resumed.load_state_dict(first.state_dict())
    _window(resumed, model)
    assert resumed.window_index == whole.window_index == 2
    assert np.array_equal(_bits(resumed), _bits(whole))


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
@pytest.mark.parametrize("bad_micro_batch", [0, 1])
def test_an_inf_gradient_in_a_bfloat16_arena_is_found_and_its_window_skipped(rounding: str,
                                                                           bad_micro_batch: int) -> None:
    model = mlp("float32")
    acc = Accumulator(model, steps=2, accum_dtype="bfloat16", rounding=rounding)
    x, y = data()
    for i in range(2):
        rows = x[3 * i:3 * i + 3].copy()
        if i == bad_micro_batch:
            rows[1, 2] = np.inf
        acc.backward(summed_loss(model, rows, y[3 * i:3 * i + 3], "float32"), num_items=3)
    assert acc.found_nonfinite() is True
    acc.zero()
    assert acc.skipped_windows == [0]


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_16_bit_gradients_are_cast_by_the_kernel_that_adds_them(rounding: str) -> None:
    model = mlp("bfloat16")
    acc = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding=rounding, trace=True)
    x, y = data()
    for sl in split(len(y), SIZES):
        acc.backward(summed_loss(model, x[sl], y[sl], "bfloat16"), num_items=sl.stop - sl.start)
    written = {e.kernel for e in acc.trace.events if e.param}
    assert written == ({"copy_scale_stochastic", "cast_add_scale_stochastic"} if rounding == "stochastic" else
                       {"cast_copy_scale", "cast_add_scale"})


def test_a_tied_weight_draws_anew_for_its_second_write_of_a_micro_batch() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            self.linear = nn.Linear(5, 5, dtype="float32", rng=np.random.default_rng(0))

        def __call__(self, x):
            return self.linear(self.linear(x).tanh())

    model = Tied()
    acc = Accumulator(model, steps=2, fusion="leaf", accum_dtype="bfloat16", rounding="stochastic")
    x, y = data()
    acc.backward(summed_loss(model, x[:4], y[:4] % 5, "float32"), num_items=4)
    assert acc.store.state_meta()["rounding"]["draws"]["linear.weight"] == 2  # two contributions, draws 0 and 1


def test_what_a_bfloat16_arena_refuses() -> None:
    named = list(mlp("float32").named_parameters())
    with pytest.raises(ValueError, match=r"rounding='stochastic' rounds the sums of a bfloat16 arena; a float32 arena"):
        ArenaStore(named, "float32", rounding="stochastic")
    with pytest.raises(ValueError, match="a bfloat16 arena has no Neumaier compensation"):
        ArenaStore(named, "bfloat16", compensated=True)
    with pytest.raises(ValueError, match="rounding must be one of nearest, stochastic, got 'down'"):
        ArenaStore(named, "bfloat16", rounding="down")
    with pytest.raises(ValueError, match=r"rounding_seed must be an int in \[0, 2\*\*64\), got -1"):
        ArenaStore(named, "bfloat16", rounding="stochastic", rounding_seed=-1)
    with pytest.raises(TypeError, match=r"cannot hold the gradient of the float64 parameter 0\.weight"):
        ArenaStore(list(mlp("float64").named_parameters()), "bfloat16")
    with pytest.raises(ValueError, match=r"a bfloat16 arena .* needs an arena: use fusion='leaf' or 'gemm'"):
        Accumulator(mlp("float32"), steps=2, fusion="none", accum_dtype="bfloat16")
    with pytest.raises(ValueError, match="data-parallel accumulation into a bfloat16 arena is not supported"):
        Accumulator(mlp("float32"), steps=2, accum_dtype="bfloat16", reducer=object())  # refused before it is used


def test_a_checkpoint_of_another_rounding_is_refused_before_anything_loads() -> None:
    model = mlp("float32")
    saved = Accumulator(model, steps=4, accum_dtype="bfloat16", rounding="stochastic")
    _window(saved, model)
    state = saved.state_dict()
    nearest = Accumulator(model, steps=4, accum_dtype="bfloat16")
    _window(nearest, model)
    before = _bits(nearest)
    with pytest.raises(ValueError, match="saved with rounding='stochastic', this store rounds 'nearest'"):
        nearest.store.load(state["meta"]["store"], state["arrays"])
    assert np.array_equal(_bits(nearest), before)
    meta = state["meta"]["store"]
    meta["rounding"]["draws"]["ghost"] = 1
    with pytest.raises(ValueError, match="names unknown parameters: ghost"):
        saved.store.load(meta, state["arrays"])

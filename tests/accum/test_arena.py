"""The arena is one aligned, persistent buffer; views alias it; it is never reallocated."""

from __future__ import annotations

import re

import numpy as np
import pytest

from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator, GradArena
from tests.accum.helpers import data, mlp, summed_loss


def test_views_alias_one_aligned_flat_buffer() -> None:
    model = mlp("float32")
    arena = GradArena(model.named_parameters())
    buffer = arena.buffer
    assert buffer.ctypes.data % 64 == 0
    for _, param in model.named_parameters():
        view = arena.view(param)
        assert view.shape == param.shape and view.dtype == np.float32
        assert np.shares_memory(view, buffer)
        assert view.ctypes.data % 64 == 0  # each view starts on a cache line
    assert arena.nbytes >= sum(p.data.nbytes for p in model.parameters())


def test_mixed_dtypes_get_one_buffer_per_accumulation_dtype() -> None:
    model = nn.Sequential(nn.Linear(3, 4, dtype="bfloat16"), nn.Linear(4, 2, dtype="float64"))
    arena = GradArena(model.named_parameters())
    assert set(arena.buffers) == {np.dtype(np.float32), np.dtype(np.float64)}
    assert arena.view(model[0].weight).dtype == np.float32  # 16-bit gradients sum in float32
    with pytest.raises(ValueError, match="holds 2 buffers"):
        _ = arena.buffer
    with pytest.raises(TypeError, match="accum_dtype must be float32 or float64"):
        GradArena(model.named_parameters(), "float16")


@pytest.mark.parametrize("fusion", ["leaf", "gemm"])
def test_arena_is_allocated_once_across_windows_and_epochs(fusion: str) -> None:
    model = mlp("float32")
    x, y = data()
    opt = optim.SGD(0.01, momentum=0.9)
    acc = Accumulator(model, steps=3, fusion=fusion)
    buffer = acc.arena.buffer
    views = {name: acc.arena.view(p) for name, p in model.named_parameters()}
    allocations = GradArena.allocations
    for _ in range(10):
        for i in range(3):
            acc.backward(summed_loss(model, x[i * 5:(i + 1) * 5], y[i * 5:(i + 1) * 5], "float32"), num_items=5)
        opt.step(model, acc)
        acc.zero()
    assert GradArena.allocations == allocations
    assert acc.arena.buffer is buffer
    assert all(acc.arena.view(p) is views[name] for name, p in model.named_parameters())


def test_a_twin_arena_has_the_same_layout_and_its_own_memory() -> None:
    model = mlp("float32")
    arena = GradArena(model.named_parameters(), "float64", shards=3)
    twin = arena.like()
    assert (twin.accum_dtype, twin.shards, twin.names) == (arena.accum_dtype, arena.shards, arena.names)
    assert repr(twin) == repr(arena)
    for param in model.parameters():
        assert twin.span(param) == arena.span(param)
        assert not np.shares_memory(twin.view(param), arena.view(param))


def test_saved_buffers_are_copies_that_later_writes_leave_alone() -> None:
    model = mlp("float32")
    arena = GradArena(model.named_parameters())
    arena.buffer[:] = 1.0
    saved = arena.state_arrays()
    arena.buffer[:] = 2.0
    np.testing.assert_array_equal(saved["float32"], 1.0)
    arena.load_state_arrays(saved)
    np.testing.assert_array_equal(arena.buffer, 1.0)


@pytest.mark.parametrize(("saved", "got"), [
    (lambda n: {"float32": np.zeros(3, np.float32)}, lambda n: "float32[3]"),
    (lambda n: {"float32": np.zeros(n, np.float64)}, lambda n: f"float64[{n}]"),
    (lambda n: {"float64": np.zeros(n, np.float64)}, lambda n: "None"),
], ids=["shape", "dtype", "missing"])
def test_a_saved_buffer_that_does_not_fit_is_refused_by_name(saved, got) -> None:
    arena = GradArena(mlp("float32").named_parameters())
    n = arena.buffer.size
    with pytest.raises(ValueError, match=rf"^GradArena: saved buffer for float32 does not fit: expected "
                                         rf"float32\[{n}\], got {re.escape(got(n))}$"):
        arena.load_state_arrays(saved(n))

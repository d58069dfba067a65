"""The arena is one aligned, persistent buffer; views alias it; it is never reallocated."""

from __future__ import annotations

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

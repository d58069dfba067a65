"""The arena is one aligned, persistent buffer; views alias it; it is never reallocated."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator, GradArena
from minitorch_accum.backend import Device, NumpyBackend
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


@pytest.mark.parametrize("misaligned_by", [8, 16, 48])
def test_a_buffer_starts_on_a_cache_line_whatever_the_allocation_it_is_cut_from(
        monkeypatch: pytest.MonkeyPatch, misaligned_by: int) -> None:
    zeros = np.zeros

    def misaligned(shape, dtype=float):  # the raw bytes NumPy hands the arena start off a cache line
        if np.dtype(dtype) != np.uint8:
            return zeros(shape, dtype=dtype)
        raw = zeros(shape + 128, dtype=np.uint8)
        start = (misaligned_by - raw.ctypes.data) % 64
        return raw[start:start + shape]

    monkeypatch.setattr(np, "zeros", misaligned)
    model = mlp("float32")
    arena = GradArena(model.named_parameters())
    monkeypatch.undo()
    assert arena.buffer.ctypes.data % 64 == 0
    assert all(arena.view(p).ctypes.data % 64 == 0 for p in model.parameters())


def test_mixed_dtypes_get_one_buffer_per_accumulation_dtype() -> None:
    model = nn.Sequential(nn.Linear(3, 4, dtype="bfloat16"), nn.Linear(4, 2, dtype="float64"))
    arena = GradArena(model.named_parameters())
    assert set(arena.buffers) == {np.dtype(np.float32), np.dtype(np.float64)}
    assert arena.view(model[0].weight).dtype == np.float32  # 16-bit gradients sum in float32
    with pytest.raises(ValueError, match="holds 2 buffers"):
        _ = arena.buffer
    with pytest.raises(TypeError, match="accum_dtype must be float32, float64 or bfloat16, got float16"):
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


@pytest.mark.parametrize("accum_dtype", ["float32", "float64"])
def test_a_twin_arena_has_the_same_layout_and_its_own_memory(accum_dtype: str) -> None:
    model = mlp("float32")
    arena = GradArena(model.named_parameters(), accum_dtype, shards=3)
    twin = arena.like()
    # by name: NumPy takes None for float64, so None == np.dtype("float64") holds
    assert twin.accum_dtype.name == arena.accum_dtype.name == accum_dtype
    assert (twin.shards, twin.names) == (arena.shards, arena.names)
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


def _line_layout(sizes: list[int], per_line: int, shards: int = 1) -> tuple[list[int], int]:
    """Offsets and buffer length by the documented rule: each gradient starts on the next
    64-byte line, and the buffer ends on a multiple of ``shards`` lines."""
    offsets, end = [], 0
    for size in sizes:
        start = -(-end // per_line) * per_line
        offsets.append(start)
        end = start + size
    multiple = shards * per_line
    return offsets, -(-end // multiple) * multiple


@pytest.mark.parametrize(("accum_dtype", "shards"), [(None, None), ("float32", 1), ("float64", 3)],
                         ids=["defaults", "float32", "float64-3-shards"])
def test_each_gradient_starts_on_a_line_and_the_buffer_pads_only_its_end(accum_dtype, shards) -> None:
    model = mlp("float32")
    named = list(model.named_parameters())
    if accum_dtype is None:
        arena, accum_dtype, shards = GradArena(named), "float32", 1
    else:
        arena = GradArena(named, accum_dtype, shards=shards)
    dtype = np.dtype(accum_dtype)
    offsets, length = _line_layout([p.size for _, p in named], 64 // dtype.itemsize, shards)
    assert [arena.span(p) for _, p in named] == [(dtype, o, p.size) for o, (_, p) in zip(offsets, named, strict=True)]
    assert arena.buffer.size == length and arena.nbytes == length * dtype.itemsize
    assert arena.accum_dtype.name == dtype.name and arena.shards == shards
    assert arena.names == [name for name, _ in named]
    for _, param in named:
        assert arena.view(param).dtype == dtype  # float32 parameters, float64 sums when asked


def test_an_accumulator_without_a_reducer_pads_its_arena_to_one_line() -> None:
    model = mlp("float32")
    named = list(model.named_parameters())
    _, length = _line_layout([p.size for _, p in named], 16)
    acc = Accumulator(model, steps=2)
    assert acc.arena.buffer.size == length
    assert acc.memory_report().arena == length * 4


@pytest.mark.parametrize("shards", [0, -1, True, 1.5, "2"])
def test_a_shard_count_that_is_not_a_positive_int_is_refused_by_value(shards) -> None:
    with pytest.raises(ValueError, match=f"^GradArena: shards must be a positive int, got {re.escape(repr(shards))}$"):
        GradArena(mlp("float32").named_parameters(), shards=shards)


def test_an_arena_of_nothing_or_of_a_foreign_parameter_is_a_named_error() -> None:
    with pytest.raises(ValueError, match=r"^GradArena: the model has no parameters$"):
        GradArena([])
    arena = GradArena(mlp("float32").named_parameters())
    foreign = nn.Linear(2, 7, dtype="float32").weight
    with pytest.raises(KeyError, match=re.escape(f"GradArena: parameter of shape {foreign.shape} is not part of "
                                                 "this arena")):
        arena.view(foreign)


class _Device(NumpyBackend):
    """A backend on ``cuda:1`` whose arrays come from an array module that is not NumPy
    (NumPy's functions under another name, as CuPy's would be), allocated in its device scope."""

    def __init__(self) -> None:
        super().__init__()
        self.device = Device("cuda", 1)
        self.allocated: list[tuple[int, np.dtype, bool]] = []
        self.in_scope = False
        self.xp = SimpleNamespace(zeros=self._zeros)

    def _zeros(self, count: int, dtype: np.dtype) -> np.ndarray:
        self.allocated.append((count, np.dtype(dtype), self.in_scope))
        return np.zeros(count, dtype=dtype)

    @contextlib.contextmanager
    def device_scope(self) -> Iterator[None]:
        self.in_scope = True
        try:
            yield
        finally:
            self.in_scope = False


def _on(backend: NumpyBackend, *shape: int) -> mta.Tensor:
    return mta.Tensor(np.full(shape, 3.0, dtype=np.float32), requires_grad=True, _backend=backend)


def test_parameters_on_two_devices_are_refused_naming_the_parameter_and_both_devices() -> None:
    first = nn.Linear(3, 2, dtype="float32").weight
    with pytest.raises(ValueError, match=r"^GradArena: parameter head\.bias is on cuda:1, others on cpu$"):
        GradArena([("head.weight", first), ("head.bias", _on(_Device(), 2))])


def test_an_arena_on_a_device_is_one_zeroed_buffer_per_dtype_made_in_its_device_scope() -> None:
    device = _Device()
    weight, bias = _on(device, 5, 4), _on(device, 4)
    arena = GradArena([("weight", weight), ("bias", bias)], shards=2)
    assert device.allocated == [(64, np.dtype(np.float32), True)]  # 20 and 4 elements, padded to 2 lines of 16
    assert arena.view(weight).dtype == np.float32 and arena.view(weight).shape == (5, 4)
    np.testing.assert_array_equal(arena.buffer, 0.0)
    device.allocated.clear()
    GradArena([("weight", weight)], "float64")
    assert device.allocated == [(24, np.dtype(np.float64), True)]


def test_a_bfloat16_arena_on_a_device_is_refused_naming_the_device() -> None:
    with pytest.raises(TypeError) as refused:
        GradArena([("weight", _on(_Device(), 5, 4))], "bfloat16")
    assert str(refused.value) == ("GradArena: a bfloat16 arena needs NumPy arrays (CuPy has no bfloat16 dtype); the "
                                  "model is on cuda:1")


def test_every_buffer_allocated_is_counted_once() -> None:
    model = nn.Sequential(nn.Linear(3, 4, dtype="bfloat16"), nn.Linear(4, 2, dtype="float64"))
    before = GradArena.allocations
    arena = GradArena(model.named_parameters())
    assert GradArena.allocations == before + 2  # a float32 and a float64 buffer
    arena.like()
    assert GradArena.allocations == before + 4


def test_the_repr_lists_each_buffer_with_its_length_and_the_bytes() -> None:
    model = nn.Sequential(nn.Linear(3, 4, dtype="bfloat16"), nn.Linear(4, 2, dtype="float64"))
    arena = GradArena(model.named_parameters())
    f32, f64 = arena.buffers[np.dtype(np.float32)].size, arena.buffers[np.dtype(np.float64)].size
    assert repr(arena) == f"GradArena(4 params, float32[{f32}], float64[{f64}], {f32 * 4 + f64 * 8} bytes)"

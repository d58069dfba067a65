"""The arena's writes as observation sees them: wrappers of the store's sink, chosen per micro-batch,
that time each write for the trace and keep its scratch out of memory probes; nothing when
nothing watches."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.accum import Accumulator, ArenaStore, ContainerStore
from minitorch_accum.accum import arena_store as arena_store_module
from minitorch_accum.backend.numpy_backend import NumpyBackend
from minitorch_accum.kernels import bytes_moved
from minitorch_accum.observe import PeakMemory
from minitorch_accum.observe.watched_writes import TracedWrites, UncountedWrites, watched_writes
from tests.accum.helpers import data, mlp, summed_loss


class Recorder:
    """Keeps every kernel it hears of, as (args, keyword args)."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def __call__(self, *args, **kwargs) -> None:
        self.calls.append((args, kwargs))

    def of(self, param: str) -> list[tuple[tuple, dict]]:
        return [(a, k) for a, k in self.calls if a[0] == param]


def test_each_leaf_write_is_heard_as_a_materialized_contribution_by_the_kernel_that_ran() -> None:
    model = mlp("float64")
    x, y = data()
    recorder = Recorder()
    store = ArenaStore(list(model.named_parameters()), "float64", fuse_gemm=False)
    for rows in (slice(0, 4), slice(4, 9)):
        store.micro_batch(summed_loss(model, x[rows], y[rows], "float64"), None, 1.0, TracedWrites(store, recorder))
    for name, param in model.named_parameters():
        (first, first_kw), (second, second_kw) = recorder.of(name)
        assert (first[1], second[1]) == ("copy_scale", "add_scale")
        assert first[2] == param.size and second[3] == bytes_moved("add_scale", param.size, 8, 8) == param.size * 24
        for kwargs in (first_kw, second_kw):
            assert kwargs["materialized"] is True and kwargs["window_pass"] is False


def test_a_gemm_write_is_heard_with_its_factors_read_twice_and_the_view_once_then_twice() -> None:
    """The GEMM reads both factors and the norms read them again; beta = 1 also reads the view."""
    model = mlp("float32")
    x, y = data()
    recorder = Recorder()
    store = ArenaStore(list(model.named_parameters()))
    for rows in (4, 6):
        store.micro_batch(summed_loss(model, x[:rows], y[:rows], "float32"), None, 1.0, TracedWrites(store, recorder))
    for name, param in model.named_parameters():
        if not name.endswith("weight"):
            continue
        (first, first_kw), (second, second_kw) = recorder.of(name)
        fan_in, fan_out = param.shape
        assert (first[1], second[1]) == ("gemm-beta0", "gemm-beta1")
        assert first[3] == 2 * 4 * (fan_in + fan_out) * 4 + param.size * 4
        assert second[3] == 2 * 6 * (fan_in + fan_out) * 4 + 2 * param.size * 4
        for kwargs in (first_kw, second_kw):
            assert kwargs["materialized"] is False and kwargs["window_pass"] is False


def test_a_gemm_that_falls_back_to_a_product_is_heard_as_materialized(monkeypatch) -> None:
    model = mlp("float64")
    x, y = data()
    backend = type(next(iter(model.parameters())).backend)
    monkeypatch.setattr(backend, "gemm_into", lambda self, a, b, out, alpha, beta:
                        NumpyBackend._gemm_fallback(self, a, b, out, alpha, beta))
    recorder = Recorder()
    store = ArenaStore(list(model.named_parameters()), "float64")
    store.micro_batch(summed_loss(model, x[:4], y[:4], "float64"), None, 1.0, TracedWrites(store, recorder))
    for _, kwargs in recorder.of("0.weight"):
        assert kwargs["materialized"] is True
    assert [a[1] for a, _ in recorder.of("0.weight")] == ["gemm-fallback"]
    expected = summed_loss(model, x[:4], y[:4], "float64").backward()
    for p, view in store.views():
        np.testing.assert_allclose(view, expected[p], rtol=1e-14, atol=1e-15)


def test_the_wrappers_are_chosen_by_what_watches_and_none_when_nothing_does() -> None:
    model = mlp()
    store = ArenaStore(list(model.named_parameters()))
    assert watched_writes(store, None) is None
    traced = watched_writes(store, Recorder())
    assert isinstance(traced, TracedWrites) and traced.inner is store
    with PeakMemory():
        uncounted = watched_writes(store, None)
        both = watched_writes(store, Recorder())
    assert isinstance(uncounted, UncountedWrites) and uncounted.inner is store
    assert isinstance(both, UncountedWrites) and isinstance(both.inner, TracedWrites)
    assert watched_writes(store, None) is None  # the probe closed
    assert watched_writes(ContainerStore(list(model.named_parameters())), Recorder()) is None


@pytest.mark.parametrize(("trace", "probe", "sink"), [
    (False, False, type(None)), (True, False, TracedWrites), (False, True, UncountedWrites),
], ids=["untraced", "traced", "probed"])
def test_the_engine_gets_the_store_itself_unless_something_watches(monkeypatch, trace: bool, probe: bool,
                                                                   sink: type) -> None:
    model = mlp()
    x, y = data()
    given = []
    run_backward = arena_store_module.run_backward

    def spy(loss, seed, sink):
        given.append(sink)
        return run_backward(loss, seed, sink=sink)

    monkeypatch.setattr(arena_store_module, "run_backward", spy)
    acc = Accumulator(model, steps=1, trace=trace)
    if probe:
        with acc.micro_batch():
            acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    else:
        acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    (used,) = given
    assert used is acc.store if sink is type(None) else isinstance(used, sink)


def test_a_wrapper_reads_the_stores_leaf_done_at_every_backward() -> None:
    model = mlp()
    store = ArenaStore(list(model.named_parameters()))
    wrapped = UncountedWrites(TracedWrites(store, Recorder()))
    assert wrapped.leaf_done is None and wrapped.fuses_gemm is store.fuses_gemm

    def done(param) -> None: ...

    store.leaf_done = done  # data parallelism sets it for the window's last micro-batch
    assert wrapped.leaf_done is done

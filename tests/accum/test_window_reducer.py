"""What the Accumulator asks of a data-parallel reducer (``accum/window_reducer.py``): the notice
that the window's last micro-batch is about to run, on the accumulator's own store, once per
window; the reduction inside the window's close, as its own span of the trace."""

from __future__ import annotations

import itertools
import time

import pytest

from minitorch_accum.accum import Accumulator, ArenaStore
from minitorch_accum.distributed import DataParallel, LocalCommunicator
from tests.accum.helpers import data, mlp, summed_loss


class OneRank:
    """A WindowReducer over one rank: the local window is the global one; it notes every call."""

    shards = 1
    sharded = False

    def __init__(self) -> None:
        self.closing: list[ArenaStore] = []
        self.reduced = 0

    def window_closing(self, store: ArenaStore) -> None:
        self.closing.append(store)

    def reduce(self, store: ArenaStore, micro_batches: int, items: int) -> tuple[int, int]:
        self.reduced += 1
        return micro_batches, items

    def finite_check(self, store: ArenaStore) -> bool:
        return store.finite_check()

    def norm(self, store: ArenaStore) -> float:
        return store.norm()

    def complete(self, store: ArenaStore) -> None:
        pass


def _backward(acc: Accumulator, model, i: int, **kwargs) -> None:
    x, y = data()
    acc.backward(summed_loss(model, x[i * 3:(i + 1) * 3], y[i * 3:(i + 1) * 3], "float64"), num_items=3, **kwargs)


@pytest.mark.parametrize("steps", [1, 3])
def test_the_reducer_hears_of_the_closing_window_once_just_before_its_last_micro_batch(steps: int) -> None:
    model = mlp()
    reducer = OneRank()
    acc = Accumulator(model, steps=steps, reducer=reducer)
    for window in range(2):
        for i in range(steps):
            assert len(reducer.closing) == window  # not before the last micro-batch
            _backward(acc, model, i)
        assert len(reducer.closing) == window + 1
        assert reducer.closing[-1] is acc.store
        acc.grads()
        acc.zero()


def test_closes_window_says_which_micro_batch_is_the_last() -> None:
    model = mlp()
    reducer = OneRank()
    acc = Accumulator(model, steps=3, reducer=reducer)
    _backward(acc, model, 0, closes_window=True)  # a short last window: its only micro-batch
    assert reducer.closing == [acc.store]
    acc.grads()
    acc.zero()
    for i in range(3):
        _backward(acc, model, i, closes_window=False)  # the caller knows better: not this window's last
    assert len(reducer.closing) == 1


def test_the_reduction_is_a_span_of_the_windows_close_and_the_normalization_names_its_reduction() -> None:
    model = mlp()
    reducer = OneRank()
    acc = Accumulator(model, steps=2, reduction="mean", reducer=reducer, trace=True)
    for i in range(2):
        _backward(acc, model, i)
    assert acc.window_scale() == 0.5
    assert reducer.reduced == 1
    spans = {span.name: span for span in acc.trace.spans if span.lane == "window"}
    assert set(spans) == {"close", "reduce over ranks", "normalization"}
    close, reduction = spans["close"], spans["reduce over ranks"]
    assert close.start <= reduction.start and reduction.start + reduction.seconds <= close.start + close.seconds + 1e-9
    assert spans["normalization"].args == {"window": 0, "reduction": "mean"}
    assert close.args == {"window": 0, "micro_batches": 2}


def test_every_collective_lies_inside_the_reduction_span_however_far_apart_two_clock_readings_are(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # each reading 1 ms after the last: a span that took its own reading after the instant its
    # collectives were laid out from would start after the first bucket (CI saw 5 us under load)
    ticks = itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 1e-3)
    model = mlp()
    reducer = DataParallel(LocalCommunicator(), bucket_bytes=128, first_bucket_bytes=128)
    acc = Accumulator(model, steps=2, reducer=reducer, trace=True)
    for i in range(2):
        _backward(acc, model, i)
    acc.window_scale()
    (reduction,) = [span for span in acc.trace.spans if span.name == "reduce over ranks"]
    collectives = [e for e in acc.trace.events if e.kernel == "allreduce"]
    assert len([e for e in collectives if e.elements > 0]) > 1  # several buckets, laid end to end
    for event in collectives:
        assert reduction.start <= event.start
        assert event.start + event.seconds <= reduction.start + reduction.seconds

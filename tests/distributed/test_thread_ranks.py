"""DataParallel on simulated ranks (threads of this process, no mpiexec): the global window each
rank ends with, with and without overlapped buckets, the facts the ranks agree on and the record
of each window's reduction, checked against one process holding every micro-batch."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import DataParallel
from minitorch_accum.testing import run_ranks
from tests.accum.helpers import TwoHeads, data, max_difference, mlp, summed_loss, window_grads

# (rank, window) -> the heads of its two micro-batches, in order: in window 0 every rank's last
# micro-batch leaves head a alone (its buckets wait for the reduction phase); in window 1 rank 0
# writes only head a and rank 1 only head b
HEADS = {(0, 0): (False, True), (1, 0): (False, True), (0, 1): (False, False), (1, 1): (True, True)}
ROWS = [slice(0, 3), slice(3, 7), slice(7, 12), slice(12, 14)]  # rank 0's two, then rank 1's two


def _micro_batches(rank: int, window: int) -> list[tuple[bool, slice]]:
    return list(zip(HEADS[rank, window], ROWS[2 * rank:2 * rank + 2], strict=True))


def _one_process(compensated: bool) -> list[dict[str, np.ndarray]]:
    x, y = data()
    model = TwoHeads()
    acc = Accumulator(model, steps=4, fusion="leaf", accum_dtype="float64", compensated=compensated)
    out = []
    for window in (0, 1):
        for rank in (0, 1):
            for use_b, rows in _micro_batches(rank, window):
                model.use_b = use_b
                acc.backward(summed_loss(model, x[rows], y[rows], "float64"), num_items=len(y[rows]))
        out.append(window_grads(acc, model))
        acc.zero()
    return out


def _rank(comm, compensated: bool, overlap: bool) -> dict:
    x, y = data()
    model = TwoHeads()
    # one 64-byte line per rank and bucket: parameters are cut by bucket edges
    reducer = DataParallel(comm, bucket_bytes=128, first_bucket_bytes=128, overlap=overlap)
    fresh = (reducer.last.buckets, reducer.windows_reduced, reducer.stop_agreed)
    acc = Accumulator(model, steps=2, fusion="leaf", accum_dtype="float64", compensated=compensated,
                      reducer=reducer, trace=True)
    grads, records, reduced, events = [], [], [], []
    for window in (0, 1):
        for use_b, rows in _micro_batches(comm.rank, window):
            model.use_b = use_b
            acc.backward(summed_loss(model, x[rows], y[rows], "float64"), num_items=len(y[rows]))
        grads.append(window_grads(acc, model))
        assert reducer.last.started + reducer.last.seconds <= time.perf_counter()
        assert not reducer.stop_agreed  # no rank asked to stop
        records.append(reducer.last)
        reduced.append(reducer.windows_reduced)
        events.append([e for e in acc.trace.events if e.window == window and e.kernel == "allreduce"])
        acc.zero()
    return {"grads": grads, "records": records, "reduced": reduced, "fresh": fresh, "events": events,
            "plan": reducer.buckets(acc.store), "names": [n for n, _ in model.named_parameters()],
            "spans": {n: acc.store.arena.span(p) for n, p in model.named_parameters()}}


@pytest.mark.parametrize("compensated", [False, True], ids=["plain", "compensated"])
@pytest.mark.parametrize("overlap", [False, True], ids=["after", "overlapped"])
def test_every_rank_ends_with_the_one_process_window(compensated: bool, overlap: bool) -> None:
    expected = _one_process(compensated)
    for got in run_ranks(2, lambda comm: _rank(comm, compensated, overlap)):
        for window in (0, 1):
            assert max_difference(got["grads"][window], expected[window]) <= 1e-15
        assert got["fresh"] == ([], 0, False)  # before any window: nothing reduced, no stop
        assert got["reduced"] == [1, 2]


def _waits_for_a(bucket, spans) -> bool:
    return any(spans[n][1] < bucket.stop and spans[n][1] + spans[n][2] > bucket.start for n in ("a.weight", "a.bias"))


@pytest.mark.parametrize("compensated", [False, True], ids=["plain", "compensated"])
def test_overlapped_buckets_start_during_backward_exactly_when_their_parameters_are_done(compensated: bool) -> None:
    out = run_ranks(2, lambda comm: _rank(comm, compensated, overlap=True))
    for rank, got in enumerate(out):
        plan, spans, record = got["plan"], got["spans"], got["records"][0]
        # window 0: the buckets of head b (the last parameters, first in the plan) start during the
        # last backward; the first bucket holding part of head a, and every one after it, wait
        early = next(i for i, b in enumerate(plan) if _waits_for_a(b, spans))
        assert 0 < early < len(plan)
        assert record.started_during_backward == early
        assert [b.index for b in record.buckets] == [b.index for b in plan]
        assert [b.during_backward for b in record.buckets] == [True] * early + [False] * (len(plan) - early)
        assert all(b.seconds > 0 for b in record.buckets)
        # window 1: rank 0 writes no part of head b, so the first bucket never becomes ready on it;
        # rank 1 writes head b only, as in window 0
        later = got["records"][1]
        assert later.started_during_backward == (0 if rank == 0 else early)
        assert [b.during_backward for b in later.buckets] == [rank == 1 and i < early for i in range(len(plan))]


def test_bucket_records_and_trace_events_say_what_each_call_moved() -> None:
    for got in run_ranks(2, lambda comm: _rank(comm, compensated=True, overlap=False)):
        plan, record = got["plan"], got["records"][0]
        assert len(plan) > 2
        assert [b.index for b in plan] == list(range(len(plan)))
        assert [(b.index, b.start, b.stop, b.nbytes) for b in record.buckets] == \
            [(b.index, b.start, b.stop, 2 * b.nbytes) for b in plan]  # sums and compensations
        assert [b.during_backward for b in record.buckets] == [False] * len(plan)
        assert record.started_during_backward == 0
        assert 0 < record.facts_seconds < record.seconds
        assert record.bucket_seconds < record.seconds
        written = json.loads(json.dumps(record.as_dict()))
        assert set(written) == {"started", "facts_seconds", "seconds", "bytes", "started_during_backward", "buckets"}
        assert (written["started"], written["facts_seconds"], written["seconds"]) == \
            (record.started, record.facts_seconds, record.seconds)
        assert written["started_during_backward"] == 0
        for entry, bucket in zip(written["buckets"], record.buckets, strict=True):
            assert entry["offset"] == pytest.approx(bucket.started - record.started, abs=1e-9)
            assert 0 <= entry["offset"] < record.seconds
        (facts,) = [e for e in got["events"][0] if e.param == "(window facts, wait)"]
        assert (facts.micro_batch, facts.elements, facts.bytes, facts.materialized) == (-1, 0, 0, False)
        assert facts.seconds == pytest.approx(record.facts_seconds)
        events = [e for e in got["events"][0] if e is not facts]  # the buckets, in the order they started
        assert [(e.param, e.micro_batch, e.elements, e.bytes, e.materialized) for e in events] == \
            [(f"bucket {b.index} [{b.start}:{b.stop}]", -1, b.elements, b.nbytes, False) for b in record.buckets]
        assert [e.seconds for e in events] == pytest.approx([b.seconds for b in record.buckets])


def test_a_stop_requested_on_one_rank_is_agreed_by_every_rank_and_counts_are_global() -> None:
    x, y = data()

    def rank(comm):
        model = TwoHeads()
        reducer = DataParallel(comm)
        acc = Accumulator(model, steps=2, reduction="mean", accum_dtype="float64", reducer=reducer)
        agreed = []
        for window in (0, 1):
            reducer.stop_requested = comm.rank == 1 and window == 1
            for rows in ROWS[2 * comm.rank:2 * comm.rank + 2]:
                acc.backward(summed_loss(model, x[rows], y[rows], "float64"), num_items=len(y[rows]))
            scale = acc.window_scale()
            agreed.append(reducer.stop_agreed)
            acc.zero()
        return agreed, scale

    # "mean" divides by the micro-batches of every rank (4), not the items (14)
    assert run_ranks(2, rank) == [([False, True], 0.25)] * 2


def test_cancellation_across_ranks_is_kept_by_the_compensations() -> None:
    """Each rank's window cancels to a compensation only; the global window is their exact sum."""
    values = {0: (1e16, 1.0), 1: (1.0, -1e16)}  # rank 0 keeps 1.0 in comp, and so does rank 1

    def rank(comm):
        layer = nn.Linear(1, 1, bias=False, dtype="float64")
        acc = Accumulator(layer, steps=2, reduction="sum", fusion="leaf", accum_dtype="float64",
                          compensated=True, reducer=DataParallel(comm))
        for v in values[comm.rank]:
            acc.backward(layer(mta.tensor(np.array([[v]]), dtype="float64")).sum(), num_items=1)
        return float(np.asarray(acc.grads()[layer.weight]).reshape(-1)[0])

    assert run_ranks(2, rank) == [2.0, 2.0]


def test_one_reducer_plans_each_arena_it_reduces_apart() -> None:
    from minitorch_accum.distributed import LocalCommunicator

    reducer = DataParallel(LocalCommunicator(), bucket_bytes=128, first_bucket_bytes=128)
    small = Accumulator(nn.Linear(2, 1, dtype="float64"), steps=1, accum_dtype="float64", reducer=reducer)
    big = Accumulator(TwoHeads(), steps=1, accum_dtype="float64", reducer=reducer)
    for acc in (small, big):
        plan = reducer.buckets(acc.store)
        assert plan[0].stop == acc.store.arena.buffer.size and plan[-1].start == 0


def test_short_windows_closed_without_notice_reduce_every_bucket_when_overlapping() -> None:
    """A window closed early (fewer micro-batches than ``steps``, no ``closes_window``) never hears
    that it is closing: its buckets all start in the reduction phase, the first one included."""
    x, y = data()

    def rank(comm):
        model = mlp()
        acc = Accumulator(model, steps=3, fusion="leaf", accum_dtype="float64",
                          reducer=DataParallel(comm, bucket_bytes=128, first_bucket_bytes=128, overlap=True))
        out = []
        for rows in ROWS[2 * comm.rank:2 * comm.rank + 2]:  # one micro-batch per window
            acc.backward(summed_loss(model, x[rows], y[rows], "float64"), num_items=len(y[rows]))
            out.append(window_grads(acc, model))
            acc.zero()
        return out

    model = mlp()
    alone = Accumulator(model, steps=2, fusion="leaf", accum_dtype="float64")
    expected = []
    for window in (0, 1):
        for rows in (ROWS[window], ROWS[2 + window]):
            alone.backward(summed_loss(model, x[rows], y[rows], "float64"), num_items=len(y[rows]))
        expected.append(window_grads(alone, model))
        alone.zero()
    for got in run_ranks(2, rank):
        assert all(max_difference(g, e) <= 1e-15 for g, e in zip(got, expected, strict=True))

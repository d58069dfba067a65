"""The record of a window's reduction (``DataParallel.last``): one entry per bucket call, in the
order the calls started, with the bytes this rank sent and the call's start and duration; plain
data that a trace can be built from. On the one-process world, where every call still runs."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import DataParallel, LocalCommunicator, ZeroRedundancy


def _window(reducer: DataParallel, compensated: bool) -> Accumulator:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(12, 20, dtype="float64", rng=rng), nn.Tanh(),
                          nn.Linear(20, 3, dtype="float64", rng=rng))
    acc = Accumulator(model, steps=2, fusion="leaf", accum_dtype="float64", compensated=compensated,
                      reducer=reducer)
    data = np.random.default_rng(1).normal(size=(6, 12))
    for rows in (data[:3], data[3:]):
        acc.backward((model(mta.tensor(rows, dtype="float64")) ** 2).sum(), num_items=3)
    acc.grads()  # closes the window: the reduction runs
    return acc


@pytest.mark.parametrize("compensated", [False, True])
def test_each_bucket_call_is_recorded_with_its_bytes_and_time(compensated: bool) -> None:
    reducer = DataParallel(LocalCommunicator(), bucket_bytes=512, first_bucket_bytes=128)
    acc = _window(reducer, compensated)
    plan, record = reducer.buckets(acc.store), reducer.last
    assert len(plan) > 2
    assert [b.index for b in record.buckets] == [b.index for b in plan]
    for got, bucket in zip(record.buckets, plan, strict=True):
        assert (got.dtype, got.start, got.stop, got.collective) == ("float64", bucket.start, bucket.stop, "allreduce")
        assert got.nbytes == bucket.nbytes * (2 if compensated else 1)  # sums, and compensations
        assert got.seconds >= 0 and not got.during_backward
    assert record.buckets[0].started >= record.started
    assert all(a.ended <= b.started for a, b in itertools.pairwise(record.buckets))  # one after the other
    assert record.bytes == sum(b.nbytes for b in record.buckets)
    assert 0 <= record.bucket_seconds <= record.seconds
    written = json.loads(json.dumps(record.as_dict()))
    assert [b["offset"] >= 0 for b in written["buckets"]] == [True] * len(plan)
    assert written["bytes"] == record.bytes


def test_zero1_records_one_reduce_scatter_per_flat_buffer() -> None:
    reducer = ZeroRedundancy(LocalCommunicator())
    acc = _window(reducer, compensated=False)
    (bucket,) = reducer.last.buckets
    assert (bucket.collective, bucket.start, bucket.stop) == ("reduce_scatter", 0, acc.store.arena.buffer.size)
    assert bucket.nbytes == acc.store.arena.buffer.nbytes

"""The parts of data parallelism that need no second process: the global data order, the
buckets, the compensated pair sum, the one-process communicator, the launcher's choice."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minitorch_accum import nn
from minitorch_accum.accum import Accumulator, GradArena
from minitorch_accum.distributed import DataParallel, LocalCommunicator, plan_buckets, rank_windows
from minitorch_accum.distributed.checkpoint_broadcast import gather_json, share_checkpoint
from minitorch_accum.distributed.launch import make_communicator
from minitorch_accum.distributed.launch_environment import launched_world_size
from minitorch_accum.distributed.pair_sum import add_pairs
from minitorch_accum.distributed.parameter_sync import parameter_digest


@given(st.integers(1, 60), st.integers(1, 5), st.integers(1, 4), st.integers(0, 20), st.booleans())
def test_ranks_share_exactly_the_micro_batches_of_one_process(batches: int, k: int, ranks: int, start: int,
                                                              drop: bool) -> None:
    start = min(start, batches)
    one = rank_windows(batches, k * ranks, 1, 0, start, drop)
    shares = [rank_windows(batches, k, ranks, r, start, drop) for r in range(ranks)]
    assert all(len(s) == len(one) for s in shares)  # every rank takes part in every window
    for w, window in enumerate(one):
        taken = [i for s in shares for i in s[w].batches]
        assert taken == list(window.batches)  # rank order is global order: no repeats, no gaps
        assert all(len(s[w].batches) <= k for s in shares)
        assert all((s[w].first, s[w].stop) == (window.first, window.stop) for s in shares)


def test_a_short_last_window_may_leave_a_rank_with_nothing() -> None:
    windows = [rank_windows(8, 3, 2, r) for r in range(2)]
    assert [w.batches for w in windows[0]] == [(0, 1, 2), (6, 7)]
    assert [w.batches for w in windows[1]] == [(3, 4, 5), ()]
    assert [w.batches for w in rank_windows(8, 3, 2, 1, drop_last_window=True)] == [(3, 4, 5)]
    with pytest.raises(ValueError, match="0 <= rank < world_size"):
        rank_windows(8, 3, 2, 2)


def _arena(shards: int) -> GradArena:
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(30, 50, rng=rng), nn.Tanh(), nn.Linear(50, 7, rng=rng))
    return GradArena(model.named_parameters(), "float32", shards=shards)


@pytest.mark.parametrize("ranks", [1, 2, 3, 8])
def test_buckets_tile_the_arena_from_its_end_in_aligned_equal_shards(ranks: int) -> None:
    arena = _arena(ranks)
    unit = ranks * 16  # float32 elements per rank per 64-byte line
    assert arena.buffer.size % unit == 0
    buckets = plan_buckets(arena, ranks, bucket_bytes=1024, first_bucket_bytes=256)
    assert buckets[0].stop == arena.buffer.size and buckets[-1].start == 0
    for earlier, later in itertools.pairwise(buckets):
        assert later.stop == earlier.start  # contiguous, last parameters first
    assert all(b.start % unit == 0 and b.elements % unit == 0 for b in buckets)
    def whole_lines(limit: int) -> int:  # the bytes of the most whole lines per rank that fit, at least one
        return max(unit, limit // 4 // unit * unit) * 4

    assert buckets[0].nbytes == min(whole_lines(256), arena.buffer.nbytes)  # a small first bucket
    assert all(b.nbytes <= whole_lines(1024) for b in buckets)
    assert buckets[0].params[0] == "2.bias"  # the first bucket holds the last parameters
    with pytest.raises(ValueError, match="does not split into 3 aligned shards"):
        plan_buckets(_arena(2), 3)


def test_pair_sum_recovers_what_plain_addition_rounds_away() -> None:
    big, small = np.array([1e16, 1.0]), np.array([1.0, 1e-17])
    acc, comp = big.copy(), np.zeros(2)
    add_pairs(small, np.zeros(2), acc, comp)
    assert acc[0] == 1e16 and comp[0] == 1.0  # the 1.0 that acc rounds away is kept in comp
    assert math.fsum([acc[1], comp[1]]) == math.fsum([1.0, 1e-17])
    # symmetric in its operands, so MPI may combine ranks in any order
    a = (np.array([3.0, -1e300, 7e-3]), np.array([1e-17, 2.0, 0.0]))
    b = (np.array([-3.0 + 1e-15, 1e300, 1e-3]), np.array([0.0, -2.0, 1e-19]))
    ab = [x.copy() for x in b]
    add_pairs(*a, *ab)
    ba = [x.copy() for x in a]
    add_pairs(*b, *ba)
    np.testing.assert_array_equal(ab[0], ba[0])
    np.testing.assert_array_equal(ab[1], ba[1])


def test_the_one_process_world_is_counted_and_changes_nothing() -> None:
    comm = LocalCommunicator()
    data = np.arange(8.0)
    comm.allreduce(data)
    shard = np.empty(8)
    comm.reduce_scatter(data, shard)
    whole = np.empty(8)
    comm.allgather(shard, whole)
    np.testing.assert_array_equal(whole, np.arange(8.0))
    assert comm.counts.calls == {"allreduce": 1, "reduce_scatter": 1, "allgather": 1}
    assert comm.counts.bytes["allreduce"] == 64
    with pytest.raises(ValueError, match="splits into 1 shards of 8, got a shard of 4"):
        comm.reduce_scatter(data, np.empty(4))
    with pytest.raises(ValueError, match="C-contiguous"):
        comm.allreduce(np.arange(8.0)[::2])
    assert gather_json(comm, {"a": 1}) == [{"a": 1}]
    arrays = {"model": {"w": np.ones((2, 3), np.float32)}}
    got, state = share_checkpoint(comm, (arrays, {"step": 3}))
    assert state == {"step": 3} and got["model"]["w"].shape == (2, 3)


def test_an_accumulator_on_the_one_process_world_matches_no_reducer() -> None:
    def window(reducer: object) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        model = nn.Sequential(nn.Linear(4, 5, dtype="float64", rng=rng), nn.Tanh(), nn.Linear(5, 2, dtype="float64",
                                                                                              rng=rng))
        acc = Accumulator(model, steps=3, accum_dtype="float64", reducer=reducer)
        data = np.random.default_rng(1).normal(size=(9, 4))
        for i in range(3):
            import minitorch_accum as mta

            acc.backward((model(mta.tensor(data[i * 3:(i + 1) * 3], dtype="float64")) ** 2).sum(), num_items=3)
        grads = acc.grads()
        return [np.asarray(grads[p]) for p in model.parameters()]

    comm = LocalCommunicator()
    for a, b in zip(window(DataParallel(comm)), window(None), strict=True):
        np.testing.assert_array_equal(a, b)
    assert comm.counts.calls["allreduce"] == 1


def test_the_launcher_decides_the_communicator(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"):
        monkeypatch.delenv(name, raising=False)
    assert launched_world_size() == 1
    assert isinstance(make_communicator("auto"), LocalCommunicator)
    monkeypatch.setenv("PMI_SIZE", "4")
    assert launched_world_size() == 4
    with pytest.raises(ValueError, match="communicator must be one of auto, mpi, nccl, local"):
        make_communicator("gloo")


def test_parameter_digest_sees_one_bit() -> None:
    model = nn.Linear(3, 2, dtype="float64", rng=np.random.default_rng(0))
    before = parameter_digest(model)
    model.weight.data.view(np.uint64)[0, 0] ^= 1
    assert parameter_digest(model) != before


def test_bucket_sizes_must_be_positive_and_one_byte_is_one_line_per_rank() -> None:
    arena = _arena(2)
    for sizes in ((0, 256), (1024, 0), (-1, -1)):
        with pytest.raises(ValueError, match=f"bucket sizes must be positive, got {sizes[0]} and {sizes[1]}"):
            plan_buckets(arena, 2, *sizes)
    buckets = plan_buckets(arena, 2, bucket_bytes=1, first_bucket_bytes=1)
    assert {b.elements for b in buckets} == {32}  # two ranks' 64-byte lines of float32
    assert len(buckets) == arena.buffer.size // 32


def test_each_bucket_names_exactly_the_parameters_it_holds_part_of() -> None:
    # one line per bucket: edges fall on parameters' starts and ends (4x4 weights fill one line)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(4, 4, rng=rng), nn.Linear(4, 8, rng=rng), nn.Linear(8, 2, dtype="float64", rng=rng))
    arena = GradArena(model.named_parameters(), None, shards=1)
    assert len(arena.buffers) == 2
    buckets = plan_buckets(arena, 1, bucket_bytes=64, first_bucket_bytes=64)
    assert [b.index for b in buckets] == list(range(len(buckets)))
    spans = {name: arena.span(p) for name, p in model.named_parameters()}
    for name, (dtype, offset, size) in spans.items():
        lines = [b for b in buckets if name in b.params]
        assert {b.dtype for b in lines} == {dtype}
        # a parameter starts on a line: it is named by the buckets of the lines its elements fill, no more
        assert sorted(b.start for b in lines) == list(range(offset, offset + size, 64 // dtype.itemsize))
    for bucket in buckets:
        order = [list(spans).index(name) for name in bucket.params]
        assert order == sorted(order, reverse=True)  # last parameters first


def test_pair_sum_lets_inf_and_nan_through_without_warnings() -> None:
    acc, comp = np.array([np.inf, 1.0, np.nan]), np.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_pairs(np.array([-np.inf, np.inf, 1.0]), np.zeros(3), acc, comp)
    assert np.isnan(acc[0]) and acc[1] == np.inf and np.isnan(acc[2])

"""Data-parallel ranks on threads: real collectives, the library's DataParallel and Learner on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.testing import run_ranks
from minitorch_accum.testing.simulated_ranks import RankFailedError, ThreadCommunicator
from minitorch_accum.train import LearnerBuilder


def test_collectives_sum_in_rank_order_and_every_rank_gets_the_same_bits() -> None:
    def rank(comm: ThreadCommunicator) -> dict[str, np.ndarray]:
        r = comm.rank
        summed = np.array([0.1 * (r + 1), 1e16, 3.0 + r])
        comm.allreduce(summed)
        gathered = np.empty(6)
        comm.allgather(np.array([r, 10.0 * r]), gathered)
        shard = np.empty(2)
        comm.reduce_scatter(np.arange(6, dtype=np.float64) * (r + 1), shard)
        root = np.array([float(r), -float(r)])
        comm.broadcast(root, root=2)
        return {"summed": summed, "gathered": gathered, "shard": shard, "root": root}

    out = run_ranks(3, rank)
    for r, got in enumerate(out):
        np.testing.assert_array_equal(got["summed"], out[0]["summed"])
        np.testing.assert_array_equal(got["gathered"], [0, 0, 1, 10, 2, 20])
        np.testing.assert_array_equal(got["shard"], (np.arange(6) * 6.0)[2 * r:2 * r + 2])
        np.testing.assert_array_equal(got["root"], [2.0, -2.0])
    assert out[0]["summed"][0] == (0.1 + 0.2) + 0.3  # rank order, not any other


def test_a_failing_rank_names_itself_and_releases_the_others() -> None:
    def rank(comm: ThreadCommunicator) -> None:
        if comm.rank == 1:
            raise ValueError("rank one breaks")
        comm.allreduce(np.zeros(2))  # would wait forever for rank 1

    with pytest.raises(RankFailedError, match="simulated rank 1 of 2 failed: ValueError: rank one breaks"):
        run_ranks(2, rank)


def test_learner_callbacks_run_on_every_rank_with_the_same_record_and_parameters(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    data = ArrayDataset(rng.normal(size=(26, 4)), rng.integers(0, 3, 26))

    def model() -> nn.Module:
        mta.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 3, dtype="float64"))

    models = [model(), model()]  # built here: the global generator is not for threads to share
    seen: dict[int, list] = {0: [], 1: []}

    def rank(comm: ThreadCommunicator) -> int:
        learner = (LearnerBuilder(tmp_path).grads_accumulation(2).accum_dtype("float64").progress("none")
                   .distributed(comm).on_step_end(lambda lr, rec: seen[lr.rank].append((rec, lr.model.to_record())))
                   .build(models[comm.rank], optim.SGD(0.5)))
        learner.fit(DataLoader(data, 4, shuffle=False))
        return learner.step

    assert run_ranks(2, rank) == [2, 2]  # 7 micro-batches of 4 over 2 ranks x k=2: windows of 4 and 3
    assert [r["items"] for r, _ in seen[0]] == [16, 10] == [r["items"] for r, _ in seen[1]]
    for (rec0, params0), (rec1, params1) in zip(seen[0], seen[1], strict=True):
        assert rec0["loss"] == rec1["loss"]
        for name in params0:
            np.testing.assert_array_equal(params0[name], params1[name])


def test_every_rank_adds_the_deposits_in_rank_order_not_from_its_own() -> None:
    """1e16 + 1 - 1e16 in rank order is 0 (the 1 is absorbed); a rank starting from its own deposit
    (right for 2 ranks, wrong for 3) would get 1."""

    def rank(comm: ThreadCommunicator) -> np.ndarray:
        values = np.array([[1e16], [1.0], [-1e16]])[comm.rank].copy()
        comm.allreduce(values)
        return values

    assert [float(v[0]) for v in run_ranks(3, rank)] == [0.0, 0.0, 0.0]


def test_reduce_scatter_and_allgather_leave_what_they_were_given_alone() -> None:
    def rank(comm: ThreadCommunicator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        given = np.arange(4, dtype=np.float64).reshape(2, 2) * (comm.rank + 1)
        shard = np.empty(2)
        comm.reduce_scatter(given, shard)
        gathered = np.empty((2, 2))
        comm.allgather(np.array([[comm.rank, 5.0]]), gathered)
        return given, shard, gathered

    for r, (given, shard, gathered) in enumerate(run_ranks(2, rank)):
        np.testing.assert_array_equal(given, np.arange(4).reshape(2, 2) * (r + 1))
        np.testing.assert_array_equal(shard, (np.arange(4) * 3.0)[2 * r:2 * r + 2])
        np.testing.assert_array_equal(gathered, [[0, 5], [1, 5]])


def test_run_ranks_names_its_threads_runs_one_rank_and_refuses_no_rank() -> None:
    import threading

    assert run_ranks(1, lambda comm: (comm.rank, comm.world_size, threading.current_thread().name)) == [
        (0, 1, "rank-0")]
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=f"run_ranks: world_size must be a positive int, got {bad!r}"):
            run_ranks(bad, lambda comm: None)


def test_a_rank_that_never_joins_a_collective_is_given_up_on_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from minitorch_accum.testing import simulated_ranks

    monkeypatch.setattr(simulated_ranks, "_WAIT_SECONDS", 0.2)

    def rank(comm: ThreadCommunicator) -> None:
        if comm.rank == 0:
            comm.allreduce(np.zeros(2))  # rank 1 returns without joining: only the wait's end frees rank 0

    raised: list[BaseException] = []

    def run() -> None:
        try:
            run_ranks(2, rank)
        except BaseException as error:  # what run_ranks raised is what is checked
            raised.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(30)  # far beyond the 0.2 s wait: a runner still alive is waiting forever
    assert not runner.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], RankFailedError)
    assert str(raised[0]) == "simulated rank 0 of 2 failed: BrokenBarrierError: "


def test_a_rank_that_aborts_exits_and_frees_the_ranks_waiting_on_it() -> None:
    def rank(comm: ThreadCommunicator) -> None:
        if comm.rank == 0:
            comm.abort(3)
        comm.allreduce(np.zeros(2))  # would wait for rank 0 without the abort

    with pytest.raises(RankFailedError, match=r"^simulated rank 0 of 2 failed: SystemExit: 3$"):
        run_ranks(2, rank)
    with pytest.raises(RankFailedError, match=r"^simulated rank 0 of 1 failed: SystemExit: 1$"):
        run_ranks(1, lambda comm: comm.abort())

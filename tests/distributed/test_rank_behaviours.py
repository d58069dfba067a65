"""What data parallelism promises and only a multi-process run shows, on 2 ranks under mpiexec:
the parameters start as rank 0's, a non-finite gradient on one rank skips the window on every rank,
and a resume restores each rank's own random stream (dropout). Each test fails when its promise
breaks: the parameters, histories and generator states of every rank are compared, not rank 0's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.data import DataLoader
from minitorch_accum.distributed import rank_windows
from tests.distributed.launcher import run_ranks
from tests.distributed.rank_programs import classification_data, fit, mlp

pytestmark = pytest.mark.mpi

RANKS, K = 2, 3


def _params(directory: Path, rank: int) -> dict[str, np.ndarray]:
    return dict(np.load(directory / f"params-rank{rank}.npz"))


def _history(directory: Path, rank: int) -> list[dict]:
    return json.loads((directory / f"history-rank{rank}.json").read_text())


def _assert_same(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], what: str) -> None:
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{what}: {name}")


def _run(out: Path, *options: str) -> None:
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(out), f"k={K}", "compensated=1", *options])


def test_every_rank_starts_from_rank_0s_parameters(tmp_path: Path) -> None:
    own = {name: p.numpy() for name, p in mlp(1).named_parameters()}
    first = {name: p.numpy() for name, p in mlp(0).named_parameters()}
    assert all(not np.array_equal(own[name], first[name]) for name in first)  # rank 1 starts elsewhere
    _run(tmp_path / "two", "epochs=1", "init=rank")
    fit(tmp_path / "one", k=RANKS * K, epochs=1, compensated=True, distributed=False)  # rank 0's start
    one = _params(tmp_path / "one", 0)
    for rank in range(RANKS):
        _assert_same(_params(tmp_path / "two", rank), one, f"rank {rank}")


def test_a_non_finite_gradient_on_one_rank_skips_the_window_on_every_rank(tmp_path: Path) -> None:
    loader = DataLoader(classification_data(), 4, seed=3)
    share = rank_windows(len(loader), K, RANKS, rank=1)[1]  # rank 1's micro-batches of window 1
    item = int(loader.order(0)[share.batches[0] * loader.batch_size])
    rank_0 = {b for w in rank_windows(len(loader), K, RANKS, rank=0) for b in w.batches}
    assert share.batches[0] not in rank_0  # rank 0 never sees the NaN itself
    _run(tmp_path / "two", "epochs=1", f"poison={item}")
    fit(tmp_path / "one", k=RANKS * K, epochs=1, compensated=True, distributed=False, poisoned_item=item)
    one = _params(tmp_path / "one", 0)
    for rank in range(RANKS):
        assert [s["skipped"] for s in _history(tmp_path / "two", rank)] == [False, True, False, False, False]
        params = _params(tmp_path / "two", rank)
        assert all(np.isfinite(v).all() for v in params.values()), f"rank {rank} stepped on the NaN window"
        _assert_same(params, one, f"rank {rank}")
    assert [s["skipped"] for s in _history(tmp_path / "one", 0)] == [False, True, False, False, False]


def test_a_resume_restores_each_ranks_own_random_stream(tmp_path: Path) -> None:
    _run(tmp_path / "whole", "epochs=2", "dropout=1")
    _run(tmp_path / "resumed", "epochs=1", "dropout=1")
    _run(tmp_path / "resumed", "epochs=2", "dropout=1", "resume=1")
    streams = [json.loads((tmp_path / "whole" / f"rng-rank{r}.json").read_text()) for r in range(RANKS)]
    assert streams[0] != streams[1]  # each rank draws its own dropout masks
    for rank in range(RANKS):
        resumed = json.loads((tmp_path / "resumed" / f"rng-rank{rank}.json").read_text())
        assert resumed == streams[rank], f"rank {rank}'s generator after the resume is not its own"
        _assert_same(_params(tmp_path / "resumed", rank), _params(tmp_path / "whole", rank), f"rank {rank}")

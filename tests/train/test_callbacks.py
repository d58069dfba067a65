"""Learner callbacks: ``on_step_end(learner, record)`` after every optimizer step."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.train import Callback, LearnerBuilder


def loader(n: int = 26) -> DataLoader:
    rng = np.random.default_rng(0)
    return DataLoader(ArrayDataset(rng.normal(size=(n, 4)), rng.integers(0, 3, n)), 4, shuffle=False)


def builder(tmp: Path, k: int = 3) -> LearnerBuilder:
    return LearnerBuilder(tmp).grads_accumulation(k).accum_dtype("float64").progress("none").num_epochs(2)


def model() -> nn.Module:
    mta.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3, dtype="float64"))


class Snapshots(Callback):
    def __init__(self) -> None:
        self.seen: list[tuple[int, dict[str, np.ndarray], int]] = []

    def on_step_end(self, learner: Any, record: dict[str, Any]) -> None:
        params = {n: p.numpy().copy() for n, p in learner.model.named_parameters()}
        self.seen.append((record["step"], params, len(learner.history.steps)))


def test_on_step_end_sees_each_step_after_its_update_in_order(tmp_path: Path) -> None:
    snapshots, calls = Snapshots(), []
    learner = (builder(tmp_path).callback(snapshots).on_step_end(lambda lr, rec: calls.append((rec, lr.step)))
               .build(model(), optim.SGD(0.5)))
    trained, history = learner.fit(loader())
    # 26 items in 7 micro-batches of 4 per epoch: windows of 3, 3 and 1, over two epochs
    assert [r["micro_batches"] for r in history.steps] == [3, 3, 1, 3, 3, 1]
    assert [step for step, _, _ in snapshots.seen] == [1, 2, 3, 4, 5, 6]
    assert [r for r, _ in calls] == history.steps and [s for _, s in calls] == [1, 2, 3, 4, 5, 6]
    assert [logged for _, _, logged in snapshots.seen] == [1, 2, 3, 4, 5, 6]  # the record is in history
    for (_, before, _), (_, after, _) in itertools.pairwise(snapshots.seen):
        assert any(not np.array_equal(before[n], after[n]) for n in before)  # each one after its update
    for name, p in trained.named_parameters():
        np.testing.assert_array_equal(snapshots.seen[-1][1][name], p.numpy())


def test_a_skipped_step_is_reported_too_and_a_callback_error_stops_training(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 4))
    x[5, 0] = np.inf
    records: list[dict] = []
    learner = builder(tmp_path / "skip", k=2).num_epochs(1).on_step_end(lambda _, r: records.append(r)).build(
        model(), optim.SGD(0.5))
    learner.fit(DataLoader(ArrayDataset(x, rng.integers(0, 3, 8)), 2, shuffle=False))
    assert [r["skipped"] for r in records] == [False, True]  # row 5 is in the second window of 4 rows

    def fail(learner: Any, record: dict) -> None:
        if record["step"] == 2:
            raise RuntimeError("callback stops here")

    learner = builder(tmp_path / "fail").on_step_end(fail).build(model(), optim.SGD(0.5))
    with pytest.raises(RuntimeError, match="callback stops here"):
        learner.fit(loader())
    assert learner.step == 2


def test_what_is_not_a_callback_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"callback expects an object with an on_step_end\(learner, record\) "
                                        r"method, got function; pass a function with .on_step_end\(fn\)"):
        LearnerBuilder("x").callback(lambda learner, record: None)
    with pytest.raises(TypeError, match="on_step_end expects a function"):
        LearnerBuilder("x").on_step_end(3)

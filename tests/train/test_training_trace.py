"""``LearnerBuilder.trace(path)``: the trace of a whole fit, one iteration per optimizer step, the
Learner's forward passes and steps beside the Accumulator's backward, close and kernels."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.durable_files import UnwritableOutputError
from minitorch_accum.train import LearnerBuilder, TrainingInterrupted
from tests.trace_events import check_trace_event_format, complete, inside


def fit(directory: Path, trace: Path, k: int = 3, micro: int = 10, items: int = 70, interrupt_at: int | None = None):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(items, 6))
    data = ArrayDataset(x, (x[:, 0] > 0).astype(np.int64))
    mta.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
    learner = LearnerBuilder(directory).grads_accumulation(k).progress("none").trace(trace).build(
        model, optim.AdamW(lr=0.01))
    if interrupt_at is not None:
        step_model = learner.step_model
        original = step_model.train_step
        calls = []

        def train_step(batch):
            calls.append(1)
            if len(calls) == interrupt_at:
                signal.raise_signal(signal.SIGINT)
            return original(batch)

        step_model.train_step = train_step
    return learner, learner.fit(DataLoader(data, micro, shuffle=True, seed=1))


def test_a_fit_is_traced_window_by_window(tmp_path: Path) -> None:
    trace_path = tmp_path / "fit.trace.json"
    learner, (_, history) = fit(tmp_path / "run", trace_path)
    assert learner.training_trace is not None and learner.training_trace.written == trace_path
    events = check_trace_event_format(json.loads(trace_path.read_text()))
    steps = [e for e in complete(events, cat="window") if e["name"].startswith("ProfilerStep#")]
    # 7 micro-batches of 10 in windows of 3: 3, 3 and a partial window of 1
    assert len(steps) == len(history.steps) == 3
    assert [e["args"]["micro_batches"] for e in steps] == [3, 3, 1]
    forwards, backwards = complete(events, "forward"), complete(events, "backward")
    assert len(forwards) == len(backwards) == 7
    for forward, backward in zip(forwards, backwards, strict=True):
        assert forward["ts"] + forward["dur"] <= backward["ts"] + 1.0  # the loss, then its backward
    optimizer_steps = complete(events, "optimizer step")
    assert [e["args"]["step"] for e in optimizer_steps] == [1, 2, 3]
    for window, optimizer_step in zip(steps, optimizer_steps, strict=True):
        assert inside(optimizer_step, window)
        assert sum(inside(f, window) for f in forwards) == window["args"]["micro_batches"]
    alive = [e for e in events if e["ph"] == "C" and e["name"].startswith("array bytes alive")]
    assert alive and max(e["args"]["bytes"] for e in alive) > 0
    assert learner.accumulator.trace is None  # the trace belonged to the fit


def test_an_interrupted_fit_still_writes_its_trace(tmp_path: Path) -> None:
    trace_path = tmp_path / "stopped.trace.json"
    with pytest.raises(TrainingInterrupted):
        fit(tmp_path / "run", trace_path, interrupt_at=5)
    events = check_trace_event_format(json.loads(trace_path.read_text()))
    assert 1 <= len([e for e in complete(events, cat="window") if e["name"].startswith("ProfilerStep#")]) <= 2


def test_the_trace_name_is_checked_by_the_builder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"trace_out must end in \.json"):
        LearnerBuilder(tmp_path).trace(tmp_path / "fit.trace")
    assert LearnerBuilder(tmp_path).trace(None) is not None


@pytest.mark.parametrize("where", ["under a regular file", "on a read-only mount"])
def test_a_trace_that_cannot_be_written_is_refused_when_fit_starts(tmp_path: Path, request: pytest.FixtureRequest,
                                                                   where: str) -> None:
    if where == "under a regular file":
        (tmp_path / "afile").write_text("mine")
        trace, why = tmp_path / "afile" / "t.json", "which is a regular file"
    else:
        trace, why = request.getfixturevalue("read_only") / "t.json", "Read-only file system (EROFS)"
    mta.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 2))
    before = model[0].weight.numpy().copy()
    learner = LearnerBuilder(tmp_path / "run").progress("none").trace(trace).build(model, optim.AdamW(lr=0.01))
    learner.step_model.train_step = lambda batch: pytest.fail("a micro-batch ran before the trace was checked")
    data = ArrayDataset(np.zeros((8, 6)), np.zeros(8, dtype=np.int64))
    with pytest.raises(UnwritableOutputError, match=rf"^trace_out {trace}.*{re.escape(why)}"):
        learner.fit(DataLoader(data, 4))
    assert learner.step == 0 and np.array_equal(model[0].weight.numpy(), before)
    assert not (tmp_path / "run").exists()  # nor its lock, metrics or checkpoints

"""A second Ctrl-C: before the stop's checkpoint is saved it stops at once, without one, saying
so on stderr; after it, it is ignored with a message. Never a crash, never a torn checkpoint.

The in-process tests place the two signals exactly; ``interrupt_trials`` places them at random
moments in a real ``maccum train`` (the suite runs a few trials; ``python -m
tests.train.interrupt_trials --trials 50`` the full loop)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.kernels import memory_counter
from minitorch_accum.observe.array_tracker import array_tracker
from minitorch_accum.train import FileCheckpointer, LearnerBuilder, TrainingAborted, TrainingInterrupted
from minitorch_accum.train.progress import Progress
from tests.train import interrupt_trials
from tests.train.stopping_models import StopAt, send


def _data() -> DataLoader:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6))
    return DataLoader(ArrayDataset(x, (x[:, 0] > 0).astype(np.int64)), 8, seed=1)


def _model() -> nn.Module:
    rng = np.random.default_rng(0)
    return nn.Sequential(nn.Linear(6, 8, dtype="float64", rng=rng), nn.Tanh(),
                         nn.Linear(8, 2, dtype="float64", rng=rng))


def _builder(directory: Path) -> LearnerBuilder:
    return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(3).progress("none").seed(0)
            .with_file_checkpointer(every_steps=2))


def test_a_second_ctrl_c_before_the_checkpoint_stops_at_once_without_one(tmp_path: Path,
                                                                         capfd: pytest.CaptureFixture) -> None:
    # micro-batch 8 of 12 per epoch: step 2 (its checkpoint) is done, the stop would save mid-window
    learner = _builder(tmp_path).build(StopAt(_model(), 8, send(times=2)), optim.SGD(0.1))
    with pytest.raises(TrainingAborted) as stopped:
        learner.fit(_data())
    assert stopped.value.exit_status == 130
    assert "Ctrl-C again: stopped at once by a second Ctrl-C, without saving a checkpoint" in capfd.readouterr().err
    checkpointer = FileCheckpointer(tmp_path / "checkpoints")
    assert [path.name for path in checkpointer.checkpoints()] == ["step0000002-epoch0000-batch000006"]
    # the run resumes from the checkpoint before the stop
    _, history = _builder(tmp_path).build(_model(), optim.SGD(0.1)).fit(_data(), resume=True)
    assert [record["step"] for record in history.steps] == list(range(1, 9))  # 1-2 from the log, 3-8 now


def test_a_second_ctrl_c_after_the_checkpoint_is_ignored_with_a_message(tmp_path: Path, capfd: pytest.CaptureFixture,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def message(self: Progress, text: str) -> None:
        if text.startswith("interrupted: saved"):  # the stop's checkpoint is written: Ctrl-C again
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Progress, "message", message)
    learner = _builder(tmp_path).build(StopAt(_model(), 8), optim.SGD(0.1))
    with pytest.raises(TrainingInterrupted) as stopped:
        learner.fit(_data())
    assert stopped.value.exit_status == 130 and stopped.value.checkpoint.name == "step0000002-epoch0000-batch000008"
    assert "Ctrl-C again: ignored, the run is already stopping (its checkpoint is saved)" in capfd.readouterr().err
    FileCheckpointer(tmp_path / "checkpoints").load(stopped.value.checkpoint)  # intact


def test_a_second_ctrl_c_inside_a_probes_bookkeeping_waits_for_the_micro_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture) -> None:
    # the second signal is handled while a probe closes (where the ctypes fallback runs Python in
    # the allocator): raising there would leave the probe open, so the stop waits for the micro-batch
    tracker = array_tracker()
    if tracker is None:
        pytest.skip("this NumPy has no data-memory handler")
    real_close, armed = tracker.close, []

    def close_with_ctrl_c(token: object) -> tuple[int, int | None]:
        if armed:
            armed.clear()
            os.kill(os.getpid(), signal.SIGINT)  # handled here, called from PeakMemory.__exit__
        return real_close(token)

    class SecondInProbe(StopAt):
        def train_step(self, batch):
            out = super().train_step(batch)  # the first Ctrl-C, at micro-batch 8
            if self.calls == self.at:
                armed.append(True)
            return out

    monkeypatch.setattr(tracker, "close", close_with_ctrl_c)
    learner = _builder(tmp_path).build(SecondInProbe(_model(), 8), optim.SGD(0.1))
    with pytest.raises(TrainingAborted):
        learner.fit(_data())
    assert not armed  # the second Ctrl-C came inside the probe's closing
    assert np._core.multiarray.get_handler_name() == "default_allocator"  # the probe was closed
    if memory_counter.available():
        assert memory_counter.counter_state()["open_probes"] == 0
    assert "stopped at once by a second Ctrl-C" in capfd.readouterr().err
    assert learner.window.micro == 2  # the micro-batch was finished (its window holds it) before stopping


def test_random_double_ctrl_c_trials_neither_crash_nor_tear_a_checkpoint(tmp_path: Path) -> None:
    # the first trial presses after the first checkpoint, so at least one is checked on any machine
    results = [interrupt_trials.run_trial(tmp_path / f"trial{i}", np.random.default_rng(i), references=tmp_path,
                                          after_checkpoint=i == 0) for i in range(2)]
    for result in results:
        assert not result.crashed, result.describe()
        assert not result.inconsistent, result.describe()
    assert sum(len(result.checkpoints) for result in results) > 0

"""A signal at any instant of fit leaves a resumable checkpoint or a complete run, never nothing:
before the first micro-batch (even while the directory is being locked), after the last step (the
final parameters are written first, then the run stops with the signal's status), while the final
is written (a second Ctrl-C is ignored), during a checkpoint's write (a second Ctrl-C leaves no
temporary directory). A complete run's resume says so. ``maccum train`` answers a signal after fit
with the status and one line. The random-instant trials (``signal_trials``) place the signals
anywhere in whole runs of the command."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from minitorch_accum import optim
from minitorch_accum.cli import train_command
from minitorch_accum.cli.main import main
from minitorch_accum.data import DataLoader
from minitorch_accum.train import (
    Classifier,
    FileCheckpointer,
    LearnerBuilder,
    RunCompleteError,
    RunDirectoryError,
    TrainingAborted,
    TrainingInterrupted,
)
from minitorch_accum.train import learner as learner_module
from minitorch_accum.train import resume as resume_module
from minitorch_accum.train.checkpoint import file_checkpointer, writing
from minitorch_accum.train.checkpoint.leftovers import HOST
from minitorch_accum.train.resume import read_final_record
from minitorch_accum.train.training_trace import TraceWriteError
from tests.train import signal_trials
from tests.train.checkpoint.test_leftovers import dead_pid
from tests.train.stopping_models import StopAt, send
from tests.train.test_learner import dataset, model

EPOCHS, K = 2, 2  # 10 micro-batches of 10 per epoch: 5 windows an epoch, 10 optimizer steps


def _builder(directory: Path, every: int = 0) -> LearnerBuilder:
    builder = LearnerBuilder(directory).num_epochs(EPOCHS).grads_accumulation(K).progress("none").seed(0)
    return builder.with_file_checkpointer(every_steps=every) if every else builder


def _loaders() -> tuple[DataLoader, DataLoader]:
    return DataLoader(dataset(), 10, seed=1), DataLoader(dataset(30, seed=4), 10, shuffle=False)


def _fit(directory: Path, step_model=None, resume: bool = False, every: int = 0, stop: int | None = None):
    learner = _builder(directory, every).build(step_model or Classifier(model()), optim.AdamW(lr=0.01))
    if stop is not None:
        learner.stop_request.signal = stop  # as maccum train hands over a signal caught before fit
    return learner, learner.fit(*_loaders(), resume=resume)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    directory = tmp_path_factory.mktemp("whole")
    _fit(directory)
    return load_file(directory / "final.safetensors")


def _stopped(caught: pytest.ExceptionInfo) -> TrainingInterrupted:
    """The TrainingInterrupted caught (a KeyboardInterrupt is caught so that another kind fails the test
    instead of ending the session)."""
    assert isinstance(caught.value, TrainingInterrupted), repr(caught.value)
    return caught.value


def _assert_final_is(directory: Path, expected: dict[str, np.ndarray]) -> None:
    got = load_file(directory / "final.safetensors")
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


class SignalInLastValidation(Classifier):
    """Sends ``signum`` to this process during the last epoch's validation: after the last step."""

    def __init__(self, module, signum: int) -> None:
        super().__init__(module)
        self.signum, self.validations = signum, 0

    def valid_step(self, batch):
        self.validations += 1
        if self.validations == 3 * EPOCHS:  # the last of the 3 validation batches of the last epoch
            os.kill(os.getpid(), self.signum)
        return super().valid_step(batch)


def test_a_signal_before_the_first_micro_batch_stops_with_a_checkpoint_of_the_start(
        tmp_path: Path, uninterrupted: dict[str, np.ndarray]) -> None:
    with pytest.raises(KeyboardInterrupt) as stopped:
        _fit(tmp_path, stop=signal.SIGTERM)
    stop = _stopped(stopped)
    assert stop.exit_status == 143 and not stop.complete
    assert stop.checkpoint.name == "step0000000-epoch0000-batch000000"
    _, (_, history) = _fit(tmp_path, resume=True)
    assert [record["step"] for record in history.steps] == list(range(1, 11))
    _assert_final_is(tmp_path, uninterrupted)


def test_a_signal_while_the_directory_is_locked_is_handled_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               uninterrupted: dict[str, np.ndarray]) -> None:
    checked = learner_module.check_run_directory

    def check_and_press_ctrl_c(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # before fit held its handlers: a KeyboardInterrupt, nothing saved
        return checked(*args, **kwargs)

    monkeypatch.setattr(learner_module, "check_run_directory", check_and_press_ctrl_c)
    with pytest.raises(KeyboardInterrupt) as stopped:
        _fit(tmp_path)
    assert _stopped(stopped).exit_status == 130 and stopped.value.step == 0
    monkeypatch.undo()
    _fit(tmp_path, resume=True)
    _assert_final_is(tmp_path, uninterrupted)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_the_last_step_lets_the_final_be_written_then_stops(
        signum: int, tmp_path: Path, uninterrupted: dict[str, np.ndarray]) -> None:
    with pytest.raises(KeyboardInterrupt) as stopped:
        _fit(tmp_path, SignalInLastValidation(model(), signum))
    stop = _stopped(stopped)
    assert stop.complete and stop.exit_status == 128 + signum and stop.step == 10
    assert str(stop) == (f"interrupted by signal {signum} after the run completed (10 optimizer steps); wrote "
                         f"{tmp_path / 'final.safetensors'}: the run is complete, nothing to resume")
    assert FileCheckpointer(tmp_path / "checkpoints").checkpoints() == []  # none asked for, none needed
    _assert_final_is(tmp_path, uninterrupted)
    record = read_final_record(tmp_path / "final.safetensors")
    assert record is not None and (record["steps"], record["epochs"]) == (10, EPOCHS)
    final = tmp_path / "final.safetensors"
    with pytest.raises(RunCompleteError, match=rf"^the run in {tmp_path} is complete \(10 optimizer steps, 2 "
                                               rf"epoch\(s\); {final} written at {record['written_at']}\): "
                                               "nothing to resume$"):
        _fit(tmp_path, resume=True)


def test_ctrl_c_twice_while_the_final_is_written_lets_it_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capfd: pytest.CaptureFixture,
                                                                uninterrupted: dict[str, np.ndarray]) -> None:
    replace = resume_module.replace_file_atomically

    def pressed_twice_while_writing(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        return replace(*args, **kwargs)

    monkeypatch.setattr(resume_module, "replace_file_atomically", pressed_twice_while_writing)
    with pytest.raises(KeyboardInterrupt) as stopped:
        _fit(tmp_path)
    assert _stopped(stopped).complete and stopped.value.exit_status == 130
    assert "Ctrl-C again: ignored, the run is writing its final parameters" in capfd.readouterr().err
    _assert_final_is(tmp_path, uninterrupted)
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_a_second_ctrl_c_inside_a_checkpoint_write_leaves_no_temporary_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: dict[str, np.ndarray]) -> None:
    write, writes = writing.write_new_file, []

    def ctrl_c_at_the_third_file(path, data):
        write(path, data)
        writes.append(path)
        if len(writes) == 3:  # the stop's checkpoint, two files in (the first Ctrl-C came before it)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(writing, "write_new_file", ctrl_c_at_the_third_file)
    with pytest.raises(KeyboardInterrupt) as stopped:
        _fit(tmp_path, StopAt(model(), 6))  # Ctrl-C in the last micro-batch of step 3: the stop saves there
    assert isinstance(stopped.value, TrainingAborted), repr(stopped.value)
    checkpoints = tmp_path / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == []  # not even the temporary directory
    assert not (tmp_path / "final.safetensors").exists()
    monkeypatch.undo()
    # nothing was saved (stopped at once, as asked): the run starts over and ends where an uninterrupted one does
    _builder(tmp_path).build(Classifier(model()), optim.AdamW(lr=0.01)).fit(*_loaders(), overwrite=True)
    _assert_final_is(tmp_path, uninterrupted)


@pytest.mark.parametrize("where", ["removing the superseded checkpoint", "pointing latest at the new one"])
def test_a_second_ctrl_c_after_a_checkpoint_is_written_leaves_nothing_temporary(
        where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    armed, pressed = [], []

    def ctrl_c_once() -> None:  # the second Ctrl-C, in the stop's save
        if armed and not pressed:
            pressed.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    if where == "removing the superseded checkpoint":
        rmtree = file_checkpointer.shutil.rmtree

        def press_then_remove(path, *args, **kwargs):
            if ".del-" in Path(path).name:
                ctrl_c_once()
            return rmtree(path, *args, **kwargs)

        monkeypatch.setattr(file_checkpointer.shutil, "rmtree", press_then_remove)
    else:
        replace = file_checkpointer.replace_file_atomically

        def press_then_replace(path, data, tmp):
            tmp.write_bytes(data)  # the temporary pointer is written when the second Ctrl-C comes
            ctrl_c_once()
            return replace(path, data, tmp)

        monkeypatch.setattr(file_checkpointer, "replace_file_atomically", press_then_replace)

    def ctrl_c_and_arm() -> None:
        send()()
        armed.append(True)

    # Ctrl-C in the last micro-batch of step 3: its checkpoint supersedes step 2's
    learner = _builder(tmp_path, every=1).with_file_checkpointer(every_steps=1, keep=1).build(
        StopAt(model(), 6, ctrl_c_and_arm), optim.AdamW(lr=0.01))
    with pytest.raises(KeyboardInterrupt) as stopped:
        learner.fit(*_loaders())
    assert isinstance(stopped.value, TrainingAborted) and pressed, repr(stopped.value)
    checkpoints = tmp_path / "checkpoints"
    assert not [p.name for p in checkpoints.iterdir() if ".del-" in p.name or ".tmp" in p.name]
    FileCheckpointer(checkpoints).load()  # latest names an intact checkpoint (the old one or the new one)


def test_a_run_s_start_removes_what_dead_writers_left(tmp_path: Path) -> None:
    _fit(tmp_path, every=3)
    (tmp_path / "final.safetensors").unlink()  # as if killed before its end
    checkpoints = tmp_path / "checkpoints"
    dead = dead_pid()
    torn = checkpoints / f".step0000009-epoch0001-batch000008.tmp-{HOST}-{dead}"
    torn.mkdir()
    (torn / "model.safetensors").write_bytes(b"half")
    torn_final = tmp_path / f".final.safetensors.tmp-{dead}"
    torn_final.write_bytes(b"half")
    _fit(tmp_path, resume=True, every=3)
    assert not torn.exists() and not torn_final.exists()


def test_a_longer_resume_of_a_complete_run_needs_a_checkpoint(tmp_path: Path) -> None:
    _fit(tmp_path)
    longer = _builder(tmp_path).num_epochs(3).build(Classifier(model()), optim.AdamW(lr=0.01))
    with pytest.raises(RunDirectoryError, match=r"is complete \(10 optimizer steps, 2 epoch\(s\); .* and holds no "
                                                "checkpoint to go on to 3 epochs from; start a new run"):
        longer.fit(*_loaders(), resume=True)
    kept = tmp_path / "kept"
    _fit(kept, every=5)
    _, history = _builder(kept, every=5).num_epochs(3).build(Classifier(model()), optim.AdamW(lr=0.01)).fit(
        *_loaders(), resume=True)
    assert history.steps[-1]["step"] == 15


def test_a_trace_that_cannot_be_written_costs_not_the_final_parameters(tmp_path: Path,
                                                                        uninterrupted: dict[str, np.ndarray]) -> None:
    # the trace's directory is fine when fit starts (it is checked then) and becomes a file during training
    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "trace.json"

    def put_a_file_in_the_way(learner: object, record: dict) -> None:
        if traces.is_dir():
            traces.rmdir()
            traces.write_text("in the way")

    learner = (_builder(tmp_path).trace(trace).on_step_end(put_a_file_in_the_way)
               .build(Classifier(model()), optim.AdamW(lr=0.01)))
    with pytest.raises(TraceWriteError, match=rf"^cannot write the trace {trace}: [^;]+ \(E[A-Z]+\); the run is "
                                              rf"complete: {tmp_path / 'final.safetensors'} was kept$"):
        learner.fit(*_loaders())
    _assert_final_is(tmp_path, uninterrupted)


SMALL = ["train", "--dataset", "digits", "--micro-batch", "256", "--accum", "2", "--epochs", "1", "--progress", "none"]


def test_the_command_answers_a_signal_after_fit_with_its_status_and_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    report = train_command._report

    def report_and_press_ctrl_c(*args, **kwargs):
        report(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(train_command, "_report", report_and_press_ctrl_c)
    assert main([*SMALL, "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err == (f"maccum train: signal 2 came after the run completed (3 optimizer steps); "
                   f"{tmp_path / 'final.safetensors'} is written: the run is complete, nothing to resume\n")
    monkeypatch.undo()
    assert main([*SMALL, "--out", str(tmp_path), "--resume"]) == 0
    assert "is complete (3 optimizer steps, 1 epoch(s)" in capsys.readouterr().out


def test_random_instant_signals_lose_no_run(tmp_path: Path) -> None:
    # MTA_SIGNAL_TRIALS=N runs N; the trials' module runs them on demand (python -m tests.train.signal_trials)
    trials = signal_trials.run_trials(signal_trials.draw_trials(signal_trials.trial_count(50), 1, seed=0), tmp_path)
    print(signal_trials.summary(trials))
    problems = [f"trial {t.number} ({signal.Signals(t.signum).name} after {t.delay:.3f} s): {t.outcome}, exit "
                f"{t.status}: {t.problems} {t.stderr!r}" for t in trials if t.problems]
    assert not problems, "\n".join(problems)
    assert {t.outcome for t in trials} <= {"complete", "resumable"}

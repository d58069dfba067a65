"""Resume that cannot be fooled: other settings, a run already in the directory, a kill at an
epoch's end, a torn metrics line, and what an interrupted run reports."""

from __future__ import annotations

import dataclasses
import json
import re
import signal
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.data import DataLoader
from minitorch_accum.optim.lr_scheduler import StepLR
from minitorch_accum.train import (
    LearnerBuilder,
    RunDirectoryError,
    SettingsMismatchError,
    TrainingInterrupted,
)
from tests.train.stopping_models import StopAt, send
from tests.train.test_learner import dataset, model


def _builder(directory: Path, k: int = 2) -> LearnerBuilder:
    return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(k).progress("plain")
            .with_file_checkpointer(every_steps=1))


def _interrupted_run(directory: Path, at: int, k: int = 2, signum: int = signal.SIGINT) -> TrainingInterrupted:
    learner = _builder(directory, k).build(StopAt(model(), at, send(signum)), optim.AdamW(lr=0.01))
    with pytest.raises(TrainingInterrupted) as stopped:
        learner.fit(DataLoader(dataset(), 10), DataLoader(dataset(30, seed=4), 10, shuffle=False))
    return stopped.value


@pytest.mark.parametrize(("change", "named"), [
    (lambda b: b.grads_accumulation(5), "grads_accumulation 2 -> 5"),
    (lambda b: b.fusion("leaf").reduction("mean"), "fusion 'gemm' -> 'leaf', reduction 'items' -> 'mean'"),
    (lambda b: b.fusion("leaf"), "fusion 'gemm' -> 'leaf'"),
    (lambda b: b.reduction("mean"), "reduction 'items' -> 'mean'"),
    (lambda b: b.accum_dtype("float64"), "accum_dtype 'float32' -> 'float64'"),
])
def test_resume_with_other_settings_is_refused_naming_each(tmp_path: Path, change: object, named: str) -> None:
    _interrupted_run(tmp_path, at=3)
    changed = change(_builder(tmp_path)).build(model(), optim.AdamW(lr=0.01))
    with pytest.raises(SettingsMismatchError, match=r"was written with other settings: (.*, )?" + named
                       + r"(, .*)?; resume with the same settings, or allow the change "
                       r"\(allow_config_change / --allow-config-change\)$"):
        changed.fit(DataLoader(dataset(), 10), resume=True)


def test_resume_with_another_optimizer_learning_rate_or_micro_batch_is_refused(tmp_path: Path) -> None:
    _interrupted_run(tmp_path, at=3)
    with pytest.raises(SettingsMismatchError, match=r"optimizer.lr 0.01 -> 0.02"):
        _builder(tmp_path).build(model(), optim.AdamW(lr=0.02)).fit(DataLoader(dataset(), 10), resume=True)
    with pytest.raises(SettingsMismatchError, match=r"optimizer.type 'AdamW' -> 'SGD'"):
        _builder(tmp_path).build(model(), optim.SGD(0.01)).fit(DataLoader(dataset(), 10), resume=True)
    with pytest.raises(SettingsMismatchError, match=r"micro_batch 10 -> 5"):
        _builder(tmp_path).build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 5), resume=True)


def test_an_allowed_change_says_what_changes_and_uses_the_new_learning_rate(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _interrupted_run(tmp_path, at=3)
    capsys.readouterr()
    learner = _builder(tmp_path).allow_config_change().build(model(), optim.AdamW(lr=0.02))
    _, history = learner.fit(DataLoader(dataset(), 10), resume=True)
    assert "resuming with changed settings: optimizer.lr 0.01 -> 0.02" in capsys.readouterr().out
    assert learner.optimizer.lr == 0.02
    assert history.steps[-1]["lr"] == 0.02


def test_a_new_run_into_a_run_directory_is_refused_and_overwrite_replaces_it(tmp_path: Path) -> None:
    _builder(tmp_path).build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10))
    before = (tmp_path / "metrics.jsonl").read_text()
    with pytest.raises(RunDirectoryError, match=r"already holds a run .*--resume .*--overwrite"):
        _builder(tmp_path).build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10))
    assert (tmp_path / "metrics.jsonl").read_text() == before  # nothing the user had was touched
    _builder(tmp_path, k=5).build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10), overwrite=True)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert {r["micro_batches"] for r in lines if r["kind"] == "train"} == {5}


def test_a_kill_at_an_epochs_end_keeps_that_epochs_validation(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # 10 micro-batches per epoch, k = 2: the signal during micro-batch 10 stops after the epoch's
    # last step, before its validation ran
    stop = _interrupted_run(tmp_path, at=10)
    assert stop.exit_status == 130
    state = json.loads((Path(stop.checkpoint) / "state.json").read_text())
    assert state["state"]["validated"] is False
    capsys.readouterr()
    learner = _builder(tmp_path).build(model(), optim.AdamW(lr=0.01))
    _, history = learner.fit(DataLoader(dataset(), 10), DataLoader(dataset(30, seed=4), 10, shuffle=False),
                             resume=True)
    assert "resumed from step 5 (epoch 1, micro-batch 0)" in capsys.readouterr().out
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["step"]) for r in lines if r["kind"] == "valid"] == [(0, 5), (1, 10)]
    assert [r["epoch"] for r in history.valid] == [0, 1]


def test_sigterm_stops_with_status_143_after_a_checkpoint(tmp_path: Path) -> None:
    stop = _interrupted_run(tmp_path, at=3, signum=signal.SIGTERM)
    assert stop.exit_status == 143 and stop.signum == signal.SIGTERM
    assert Path(stop.checkpoint).is_dir()


def test_a_torn_metrics_line_does_not_block_resume(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _interrupted_run(tmp_path, at=3)
    with (tmp_path / "metrics.jsonl").open("a") as log:
        log.write('{"kind": "train", "epo')  # the kill came while a line was written
    capsys.readouterr()
    final, history = _builder(tmp_path).build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10),
                                                                                 resume=True)
    assert "torn last line" in capsys.readouterr().out
    assert [r["step"] for r in history.steps] == list(range(1, 11))
    reference, _ = _builder(tmp_path / "ref").build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10))
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_a_resume_keeps_the_learning_rate_the_run_reached_and_may_drop_its_scheduler(tmp_path: Path) -> None:
    def halve_at_step_2(learner: object, record: dict) -> None:
        if record["step"] == 2:
            learner.optimizer.lr = 0.005  # as a plateau rule of the user's would

    def builder(directory: Path) -> LearnerBuilder:
        return _builder(directory).on_step_end(halve_at_step_2)

    reference, whole = builder(tmp_path / "ref").build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10))
    learner = builder(tmp_path / "run").build(StopAt(model(), 7), optim.AdamW(lr=0.01))
    with pytest.raises(TrainingInterrupted):
        learner.fit(DataLoader(dataset(), 10))
    final, history = builder(tmp_path / "run").build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10),
                                                                                        resume=True)
    assert [r["lr"] for r in history.steps] == [r["lr"] for r in whole.steps] == [0.01, 0.01] + [0.005] * 8
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    # a run with a scheduler resumed without one (a scheduler is free to change) goes on from the rate it had
    scheduled = _builder(tmp_path / "sched").lr_scheduler(StepLR(0.01, step_size=1, gamma=0.5))
    learner = scheduled.build(StopAt(model(), 3), optim.AdamW(lr=0.01))
    with pytest.raises(TrainingInterrupted):
        learner.fit(DataLoader(dataset(), 10))
    saved_lr = learner.optimizer.lr
    _, history = _builder(tmp_path / "sched").build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10),
                                                                                       resume=True)
    assert {r["lr"] for r in history.steps[2:]} == {saved_lr}


class _Branches(nn.Module):
    """Parameters whose names hold a slash (ModuleDict keys are free strings)."""

    def __init__(self) -> None:
        mta.manual_seed(0)
        self.blocks = nn.ModuleDict({"in/out": nn.Linear(6, 8, dtype="float64"),
                                     "head": nn.Linear(8, 3, dtype="float64")})

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.blocks["head"](self.blocks["in/out"](x).tanh())


def test_a_model_whose_parameter_names_hold_a_slash_resumes(tmp_path: Path) -> None:
    reference, _ = _builder(tmp_path / "ref").build(_Branches(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10))
    learner = _builder(tmp_path / "run").build(StopAt(_Branches(), 3), optim.AdamW(lr=0.01))
    with pytest.raises(TrainingInterrupted):
        learner.fit(DataLoader(dataset(), 10))
    resumed = _builder(tmp_path / "run").build(_Branches(), optim.AdamW(lr=0.01))
    final, _ = resumed.fit(DataLoader(dataset(), 10), resume=True)
    assert "module.blocks.in/out.weight" in resumed.optimizer.state
    for (name, a), (_, b) in zip(reference.named_parameters(), final.named_parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_a_checkpoint_without_the_optimizer_state_is_passed_over_for_an_older_one(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from minitorch_accum.train.checkpoint.record import record_checksum

    _interrupted_run(tmp_path, at=5)  # the two kept: step 2 (after micro-batch 4) and the stop's, mid-window
    checkpoints = tmp_path / "checkpoints"
    latest = checkpoints / (checkpoints / "latest").read_text().strip()
    record = json.loads((latest / "state.json").read_text())
    del record["groups"]["optimizer"]  # as FileCheckpointer.save of a caller's own arrays would write it
    (latest / "optimizer.safetensors").unlink()
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    (latest / "state.json").write_text(json.dumps({**body, "record_sha256": record_checksum(body)}))
    capsys.readouterr()
    _, history = _builder(tmp_path).build(model(), optim.AdamW(lr=0.01)).fit(DataLoader(dataset(), 10), resume=True)
    captured = capsys.readouterr()
    assert f"checkpoint {latest} lacks the group(s) 'optimizer'" in captured.err
    assert "resumed from step 2 (epoch 0, micro-batch 4)" in captured.out
    assert [r["step"] for r in history.steps] == list(range(1, 11))


def test_final_parameters_that_cannot_be_written_name_the_file_and_why(tmp_path: Path) -> None:
    learner = _builder(tmp_path).build(model(), optim.AdamW(lr=0.01))
    learner.fit(DataLoader(dataset(), 10))
    final = tmp_path / "final.safetensors"
    final.unlink()
    final.mkdir()  # a directory in the way: the file cannot replace it
    last = learner.checkpoints.last_saved[1]
    with pytest.raises(RunDirectoryError, match=rf"^cannot write {re.escape(str(final))}: Is a directory \(EISDIR\); "
                                                rf"the last checkpoint is {re.escape(str(last))} \(resume from it\)$"):
        learner.checkpoints.save_final(learner.step)


def test_a_run_config_is_checked_when_given_and_its_tuples_kept_as_lists(tmp_path: Path) -> None:
    def run(config: dict, resume: bool) -> None:
        learner = _builder(tmp_path).num_epochs(1).progress("none").config(config).build(model(), optim.SGD(0.1))
        if resume:  # as if the run had stopped before its end: a complete run has nothing to resume
            (tmp_path / "final.safetensors").unlink()
        learner.fit(DataLoader(dataset(), 10), resume=resume)

    run({"hidden": (16, (3, 4)), "name": "a"}, resume=False)  # checkpoints hold it
    run({"hidden": [16, [3, 4]], "name": "a"}, resume=True)  # the same settings
    with pytest.raises(SettingsMismatchError, match=r"run\.hidden \[16, \[3, 4\]\] -> \[16, \[3, 5\]\]"):
        run({"hidden": (16, (3, 5)), "name": "a"}, resume=True)
    with pytest.raises(TypeError, match=r"^checkpoint config\['width'\] is a numpy\.int64, which JSON would not give "
                                        r"back unchanged"):
        LearnerBuilder(tmp_path).config({"width": np.int64(3)})
    with pytest.raises(TypeError, match=r"^checkpoint config has the key 1 of type int"):
        LearnerBuilder(tmp_path).config({1: "one"})


def test_a_dataclass_run_config_is_recorded_as_its_fields(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Run:
        hidden: tuple[int, ...] = (16, 3)
        name: str = "a"

    assert LearnerBuilder(tmp_path).config(Run())._config.run_config == {"hidden": [16, 3], "name": "a"}
    for wrong, named in ((3, "int"), (Run, "type")):  # the class is not a config: an instance is
        with pytest.raises(TypeError, match=rf"^config expects a dict or a dataclass, got {named}$"):
            LearnerBuilder(tmp_path).config(wrong)

"""``maccum train --resume --out DIR``: the run rebuilt from what its checkpoint recorded, only typed
options counting as changes; bit for bit the uninterrupted run (digits, float64)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

from minitorch_accum.cli import main
from minitorch_accum.train.callbacks import StepEndFunction
from tests.train.test_legacy_checkpoints import FIRST_LAYOUT_LACKS, _as_an_earlier_version_wrote

# none of the options a resume takes from the record at its default (but the dataset): a resume that
# took a default instead of the record would be refused (or train another run). 1438 digits in
# micro-batches of 48: 30 per epoch, windows of 3: 10 optimizer steps per epoch
STARTED = ["--dataset", "digits", "--dtype", "float64", "--accum", "3", "--micro-batch", "48", "--seed", "4",
           "--lr", "0.01", "--optimizer", "sgd", "--reduction", "sum", "--fusion", "leaf", "--compensated",
           "--checkpoint-every", "5"]


def _train(out: Path, *options: str) -> int:
    return main(["train", *options, "--out", str(out)])


def _assert_same_parameters(run: Path, reference: Path) -> None:
    got, want = load_file(run / "final.safetensors"), load_file(reference / "final.safetensors")
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    assert _train(out, *STARTED, "--epochs", "2", "--progress", "none") == 0
    return out


def _stopped_after(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """The next maccum train stops (as on Ctrl-C) at the end of optimizer step ``step``'s window."""
    from minitorch_accum.cli import train_command

    built = train_command.build_run

    def stopping(values: dict[str, Any]) -> tuple:
        learner, train, valid = built(values)

        def stop(learner: Any, record: dict[str, Any]) -> None:
            if record["step"] == step:
                learner.stop_request.signal = signal.SIGINT

        learner.callbacks.append(StepEndFunction(stop))
        return learner, train, valid

    monkeypatch.setattr(train_command, "build_run", stopping)


def test_a_resume_given_only_its_directory_ends_on_the_uninterrupted_parameters(
        tmp_path: Path, uninterrupted: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    with monkeypatch.context() as patched:
        _stopped_after(patched, 7)
        assert _train(tmp_path, *STARTED, "--epochs", "2", "--progress", "plain") == 130
    said = " ".join(capsys.readouterr().out.split())
    assert f"; continue with maccum train --resume --out {tmp_path}" in said  # the command that works, as it is
    assert _train(tmp_path, "--resume") == 0
    out = capsys.readouterr().out
    assert "resumed from step 7 (epoch 0, micro-batch 21)" in out and "trained 20 optimizer steps" in out
    _assert_same_parameters(tmp_path, uninterrupted)


def test_more_epochs_typed_on_a_resume_go_on_from_the_end_and_are_said(
        tmp_path: Path, uninterrupted: Path, capsys: pytest.CaptureFixture) -> None:
    assert _train(tmp_path, *STARTED, "--epochs", "1", "--progress", "none") == 0
    capsys.readouterr()
    assert _train(tmp_path, "--resume", "--epochs", "2", "--progress", "none") == 0
    assert capsys.readouterr().out.startswith("maccum train: resuming with --epochs 2 (was 1)\n")
    _assert_same_parameters(tmp_path, uninterrupted)
    # the cadence came from the record too: checkpoints every 5 steps, the newest 2 kept (the default's 10: 10, 20)
    assert sorted(path.name for path in (tmp_path / "checkpoints").iterdir()) == [
        "latest", "step0000015-epoch0001-batch000015", "step0000020-epoch0001-batch000030"]
    # a run that went on past its latest checkpoint and finished: its epochs are the final record's
    assert _train(tmp_path, "--resume", "--epochs", "3", "--checkpoint-every", "0", "--progress", "none") == 0
    assert capsys.readouterr().out.startswith("maccum train: resuming with --epochs 3 (was 2), --checkpoint-every 0 "
                                              "(was 5)\n")
    assert _train(tmp_path, "--resume", "--epochs", "4", "--progress", "none") == 0
    assert capsys.readouterr().out.startswith("maccum train: resuming with --epochs 4 (was 3)\n")


def test_a_typed_change_of_an_option_a_resume_keeps_is_refused_naming_it(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    assert _train(tmp_path, *STARTED, "--epochs", "1", "--progress", "none") == 0
    (tmp_path / "final.safetensors").unlink()  # as if stopped before its end
    capsys.readouterr()
    assert _train(tmp_path, "--resume", "--accum", "2", "--progress", "none") == 2
    assert capsys.readouterr().err.startswith(
        f"maccum train: error: resume: the checkpoint in {tmp_path / 'checkpoints'} was written with other "
        "settings: grads_accumulation 3 -> 2; ")
    assert not (tmp_path / "final.safetensors").exists()
    assert _train(tmp_path, "--resume", "--accum", "3", "--progress", "none") == 0  # typed as it was: no change


def test_a_complete_run_says_so_given_only_its_directory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for run, cadence in (("checkpointed", "10"), ("without-checkpoints", "0")):
        assert _train(tmp_path / run, *STARTED[:-1], cadence, "--epochs", "1", "--progress", "none") == 0
        capsys.readouterr()
        assert _train(tmp_path / run, "--resume") == 0
        assert capsys.readouterr().out.startswith(f"maccum train: the run in {tmp_path / run} is complete (10 "
                                                  "optimizer steps, 1 epoch(s); ")


def test_nothing_to_resume_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert _train(tmp_path / "missing", "--resume") == 2
    assert capsys.readouterr().err == f"maccum train: error: nothing to resume in {tmp_path / 'missing'}: it does " \
                                      "not exist\n"
    assert _train(tmp_path, "--resume") == 2
    assert capsys.readouterr().err == (f"maccum train: error: nothing to resume in {tmp_path}: it holds no checkpoint "
                                       "(a run saves one every --checkpoint-every optimizer steps and when it is "
                                       "stopped)\n")


def test_a_record_of_the_first_layout_resumes_with_the_options_it_lacks_typed(
        tmp_path: Path, uninterrupted: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    with monkeypatch.context() as patched:
        _stopped_after(patched, 10)  # at epoch 0's end: a checkpoint of the first layout said nothing of ranks
        assert _train(tmp_path, *STARTED, "--epochs", "2", "--progress", "none") == 130
    _as_an_earlier_version_wrote(tmp_path, *FIRST_LAYOUT_LACKS)  # no settings: reduction, fusion and epochs
    capsys.readouterr()
    assert _train(tmp_path, "--resume") == 2
    assert "does not record --accum, --micro-batch, --seed, --dataset, --lr, --optimizer, --dtype (written by an " \
           "earlier version" in capsys.readouterr().err
    assert _train(tmp_path, "--resume", *STARTED) == 0  # the epochs came from its config
    _assert_same_parameters(tmp_path, uninterrupted)


def test_a_resume_under_mpiexec_takes_the_record_rank_0_read(tmp_path: Path) -> None:
    from tests.distributed.launcher import run_ranks

    # one process for epoch 0 (k 4), two ranks for epoch 1 given only --epochs: k per rank 4 -> 2 keeps the
    # window; float64 and compensation make it the uninterrupted run's bits (the README's launch line)
    common = ["--dataset", "digits", "--dtype", "float64", "--compensated", "--micro-batch", "32", "--seed", "2",
              "--checkpoint-every", "12", "--progress", "plain"]
    assert _train(tmp_path / "whole", *common, "--accum", "4", "--epochs", "2") == 0
    assert _train(tmp_path / "run", *common, "--accum", "4", "--epochs", "1") == 0
    launched = run_ranks(2, ["minitorch_accum.cli", "train", "--resume", "--out", str(tmp_path / "run"),
                             "--epochs", "2"], timeout=120)
    assert launched.stdout.count("maccum train: resuming with --epochs 2 (was 1)") == 1  # rank 0 says it
    assert "k per rank 4 -> 2" in launched.stdout and launched.stdout.count("trained 24 optimizer steps") == 1
    _assert_same_parameters(tmp_path / "run", tmp_path / "whole")

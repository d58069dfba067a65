"""maccum train at its edges: help, refusals, warnings, what it says it wrote, exit statuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from minitorch_accum.cli import main

SMALL = ["--dataset", "digits", "--micro-batch", "256", "--accum", "2", "--epochs", "1", "--progress", "none"]


def test_help_shows_a_line_and_the_default_of_every_option(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for option, default in [("--accum", "8"), ("--micro-batch", "32"), ("--lr", "0.003"), ("--dtype", "float32"),
                            ("--checkpoint-every", "10"), ("--distributed", "auto")]:
        assert option in text and f"(default: {default})" in text, option
    assert "--overwrite" in text and "--allow-config-change" in text and "--compensated" in text


def test_wrote_checkpoints_is_said_only_when_it_did(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", *SMALL, "--out", str(tmp_path / "none"), "--checkpoint-every", "0"]) == 0
    said = capsys.readouterr().out
    assert "final.safetensors" in said and "checkpoints in" not in said
    assert main(["train", *SMALL, "--out", str(tmp_path / "some"), "--checkpoint-every", "1"]) == 0
    assert "checkpoints in" in capsys.readouterr().out


def test_a_micro_batch_larger_than_the_dataset_warns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", *SMALL[:2], "--micro-batch", "5000", "--accum", "1", "--epochs", "1", "--progress", "none",
                 "--out", str(tmp_path)]) == 0
    assert "--micro-batch 5000 is larger than the 1438 training items" in capsys.readouterr().err


def test_refusals_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    file = tmp_path / "a-file"
    file.write_text("mine")
    assert main(["train", *SMALL, "--out", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a regular file" in err and file.read_text() == "mine"
    assert main(["train", *SMALL, "--out", str(tmp_path / "run"), "--checkpoint-every", "1"]) == 0
    assert main(["train", *SMALL, "--out", str(tmp_path / "run")]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert main(["train", *SMALL, "--out", str(tmp_path / "run"), "--resume", "--overwrite"]) == 2
    assert "give one of them" in capsys.readouterr().err
    (tmp_path / "run" / "final.safetensors").unlink()  # as if stopped before its end: a complete run has no resume
    assert main(["train", *SMALL, "--out", str(tmp_path / "run"), "--resume", "--lr", "0.1"]) == 2
    assert "run.lr 0.003 -> 0.1" in capsys.readouterr().err
    assert main(["train", *SMALL, "--out", str(tmp_path / "run"), "--resume", "--lr", "0.1",
                 "--allow-config-change"]) == 0


def test_fusion_none_trains_in_one_process(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # --distributed defaults to auto, which outside mpiexec is plain one-process training: Burn's
    # containers (fusion none) need no arena to reduce
    assert main(["train", *SMALL, "--fusion", "none", "--out", str(tmp_path)]) == 0
    assert "trained" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["train", "compare", "explain", "precision"])
def test_a_negative_seed_is_refused_naming_the_option_once(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                          command: str) -> None:
    # NumPy's seeds are non-negative: without the check, "expected non-negative integer" named nothing
    argv = [command, "--seed", "-1", *([] if command == "explain" else ["--out", str(tmp_path / "out")])]
    if command == "precision":  # its own parser: argparse names the option and exits
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        assert capsys.readouterr().err.endswith("error: argument --seed: must be a non-negative int, got -1\n")
    else:
        assert main(argv) == 2
        assert capsys.readouterr().err == f"maccum {command}: error: --seed must be a non-negative int, got -1\n"
    assert not (tmp_path / "out").exists()


def test_each_value_is_checked_once_from_the_command_line_to_the_learner(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import Counter

    from minitorch_accum.cli.main import build_parser
    from minitorch_accum.cli.training_run import build_run
    from minitorch_accum.train.settings import Setting, read_options

    checked: Counter[str] = Counter()
    check = Setting.check

    def counted(row: Setting, value: object, from_command_line: bool = False) -> object:
        checked[row.name] += 1
        return check(row, value, from_command_line)

    monkeypatch.setattr(Setting, "check", counted)
    values = read_options(build_parser().parse_args(["train", *SMALL, "--accum", "3", "--out", str(tmp_path)]),
                          "train")
    learner, _, _ = build_run(values)
    assert learner.config.grads_accumulation == 3 and learner.accumulator.steps == 3
    assert checked["grads_accumulation"] == 1 and set(checked.values()) == {1}, checked

"""Every path a maccum command writes is checked before any work: a trace, a figure or a directory that
could not be written is one line naming the option, the path and why, exit status 2, and nothing ran (no
task loaded, no progress line, no metrics) and nothing was made at the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from minitorch_accum.cli import explain_command, explain_views, main, precision_command, training_run

SMALL = ["--dataset", "digits", "--micro-batch", "256", "--accum", "2", "--epochs", "1", "--progress", "plain"]


@pytest.fixture
def nothing_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that gets as far as loading its task fails the test (AssertionError is no refusal)."""
    def load_task(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command loaded its task before refusing its output")

    for module in (training_run, explain_command, explain_views, precision_command):
        monkeypatch.setattr(module, "load_task", load_task)


def refused(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured  # no progress line, one sentence
    return captured.err


def entries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# (command line with {bad} for the path, the option named, whether the path is a directory)
OUTPUTS = [
    (["train", *SMALL, "--out", "{run}", "--trace-out", "{bad}/t.json"], "--trace-out", "/t.json"),
    (["train", *SMALL, "--out", "{bad}/run"], "--out", "/run"),
    (["compare", *SMALL, "--out", "{bad}/compare"], "--out", "/compare"),
    (["explain", "--accum", "2", "--micro-batch", "8", "--trace-out", "{bad}/w.json"], "--trace-out", "/w.json"),
    (["explain", "--accum", "2", "--micro-batch", "8", "--figure", "{bad}/w.png"], "--figure", "/w.png"),
    (["precision", "--k", "1,2", "--out", "{bad}/precision"], "--out", "/precision"),
]
IDS = ["train-trace", "train-out", "compare-out", "explain-trace", "explain-figure", "precision-out"]


def _argv(template: list[str], bad: Path, run: Path) -> list[str]:
    return [arg.format(bad=bad, run=run) for arg in template]


@pytest.mark.parametrize("template, option, below", OUTPUTS, ids=IDS)
def test_an_output_under_a_regular_file_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                   nothing_computes: None, template: list[str],
                                                                   option: str, below: str) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    error = refused(capsys, _argv(template, blocker, tmp_path / "run"))
    assert error.startswith(f"maccum {template[0]}: error: {option} {blocker}{below} is inside {blocker}, which "
                            "is a regular file, not a directory; choose another ")
    assert entries(tmp_path) == ["afile"] and blocker.read_text() == "mine"  # no run directory, no metrics


@pytest.mark.parametrize("template, option, below", OUTPUTS, ids=IDS)
def test_an_output_on_a_read_only_file_system_is_refused_before_any_work(
        tmp_path: Path, read_only: Path, capsys: pytest.CaptureFixture, nothing_computes: None,
        template: list[str], option: str, below: str) -> None:
    error = refused(capsys, _argv(template, read_only, tmp_path / "run"))
    assert error == (f"maccum {template[0]}: error: {option} {read_only}{below}: cannot create files in {read_only}: "
                     "Read-only file system (EROFS); choose a writable directory\n")
    assert not (tmp_path / "run").exists()  # train's run directory was not made either


def test_a_trace_into_a_missing_directory_is_refused_and_the_directory_not_made(
        tmp_path: Path, capsys: pytest.CaptureFixture, nothing_computes: None) -> None:
    missing = tmp_path / "missing"
    for command in (["explain", "--accum", "2"], ["train", *SMALL, "--out", str(tmp_path / "run")]):
        error = refused(capsys, [*command, "--trace-out", str(missing / "t.json")])
        assert error == (f"maccum {command[0]}: error: --trace-out {missing / 't.json'}: its directory {missing} does "
                         f"not exist; create it first (mkdir -p {missing}) or choose another path\n")
    assert entries(tmp_path) == []


def test_a_read_only_trace_is_refused_before_the_first_step_and_a_writable_one_trains(
        tmp_path: Path, read_only: Path, capsys: pytest.CaptureFixture) -> None:
    # the case, with the task really loaded: nothing of the run is written, no step is taken
    run = tmp_path / "run"
    error = refused(capsys, ["train", *SMALL, "--out", str(run), "--trace-out", str(read_only / "t.json")])
    assert "--trace-out" in error and "Read-only file system" in error and not run.exists()
    assert main(["train", *SMALL, "--out", str(run), "--trace-out", str(tmp_path / "t.json")]) == 0
    assert (run / "final.safetensors").is_file() and (tmp_path / "t.json").is_file()
    assert "step 1" in capsys.readouterr().out


def test_explain_refuses_a_snapshot_path_in_the_way_before_recording_the_window(
        tmp_path: Path, capsys: pytest.CaptureFixture, nothing_computes: None) -> None:
    # the trace's own name is fine; the memory snapshot written beside it (w.snapshot.pickle) is a directory
    (tmp_path / "w.snapshot.pickle").mkdir()
    error = refused(capsys, ["explain", "--accum", "2", "--micro-batch", "8", "--trace-out", str(tmp_path / "w.json")])
    assert error.startswith(f"maccum explain: error: the memory snapshot beside --trace-out "
                            f"{tmp_path / 'w.snapshot.pickle'} ")
    assert entries(tmp_path) == ["w.snapshot.pickle"]

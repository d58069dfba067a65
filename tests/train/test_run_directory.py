"""Run directories: one run at a time (the lock), no silent mixing of two runs, --overwrite
removes only what this library wrote."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.train.checkpoint import FileCheckpointer
from minitorch_accum.train.metrics import MetricsLog
from minitorch_accum.train.run_directory import RunDirectoryError, check_run_directory
from minitorch_accum.train.run_lock import RunLock, RunLockedError


def a_run(directory: Path) -> None:
    """What a finished run leaves: metrics, checkpoints, final parameters."""
    directory.mkdir(parents=True, exist_ok=True)
    log = MetricsLog(directory / "metrics.jsonl")
    log.reset()
    log.write({"kind": "train", "step": 1, "loss": 0.5})
    ckpt = FileCheckpointer(directory / "checkpoints")
    for step in (1, 2, 3):
        ckpt.save(f"step{step}", {"model": {"w": np.full(3, step, dtype=np.float32)}}, {"step": step})
    (directory / "final.safetensors").write_bytes(b"final")


@pytest.mark.parametrize("entry", ["metrics.jsonl", "final.safetensors", "checkpoints/"])
def test_a_new_run_into_a_directory_holding_a_run_is_refused(tmp_path: Path, entry: str) -> None:
    if entry == "checkpoints/":
        FileCheckpointer(tmp_path / "checkpoints").save("A", {"model": {}}, {})
    else:
        (tmp_path / entry).write_text("{}\n")
    with pytest.raises(RunDirectoryError, match=rf"^run directory {tmp_path} already holds a run \({entry}\); "
                                                r"pass --resume to continue it or --overwrite to replace it$"):
        check_run_directory(tmp_path, resume=False, overwrite=False)
    assert check_run_directory(tmp_path, resume=True, overwrite=False) == []


def test_a_directory_without_a_run_is_accepted(tmp_path: Path) -> None:
    assert check_run_directory(tmp_path / "new", resume=False, overwrite=False) == []
    (tmp_path / "notes.txt").write_text("the user's")
    (tmp_path / "checkpoints").mkdir()  # empty: nothing to mix with
    (tmp_path / "metrics.jsonl").write_text("")  # a run that failed before its first step
    with RunLock(tmp_path):
        assert check_run_directory(tmp_path, resume=False, overwrite=False) == []


def test_overwrite_removes_only_what_this_library_wrote(tmp_path: Path) -> None:
    a_run(tmp_path)
    (tmp_path / "metrics.jsonl.tmp").write_text("")  # what an earlier version's interrupted truncate left
    (tmp_path / ".final.safetensors.tmp-77").write_text("")  # and an interrupted write of final parameters
    (tmp_path / "notes.txt").write_text("the user's")
    (tmp_path / "checkpoints" / "my_backup").mkdir()
    (tmp_path / "checkpoints" / "my_backup" / "state.json").write_text("{}")
    (tmp_path / "checkpoints" / "README").write_text("the user's")
    removed = check_run_directory(tmp_path, resume=False, overwrite=True)
    assert sorted(p.name for p in removed) == [".final.safetensors.tmp-77", "final.safetensors", "latest",
                                               "metrics.jsonl", "metrics.jsonl.tmp", "step2", "step3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoints", "notes.txt"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["README", "my_backup"]
    # nothing of the old run is left to mix with a new one, and the user's files are no run
    assert check_run_directory(tmp_path, resume=False, overwrite=False) == []


def test_overwrite_of_a_run_with_only_library_files_leaves_an_empty_directory(tmp_path: Path) -> None:
    a_run(tmp_path)
    check_run_directory(tmp_path, resume=False, overwrite=True)
    assert list(tmp_path.iterdir()) == []
    assert check_run_directory(tmp_path, resume=False, overwrite=False) == []


def test_overwrite_refuses_a_symlink_under_a_run_file_name_and_changes_nothing(tmp_path: Path) -> None:
    a_run(tmp_path)
    (tmp_path / "thesis.tex").write_text("the user's")
    (tmp_path / "final.safetensors").unlink()
    (tmp_path / "final.safetensors").symlink_to(tmp_path / "thesis.tex")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    with pytest.raises(RunDirectoryError, match=r"final\.safetensors is a symlink, which this library does not "
                                                r"write; move it away first$"):
        check_run_directory(tmp_path, resume=False, overwrite=True)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "thesis.tex").read_text() == "the user's"


@pytest.mark.parametrize("where", ["directory", "parent"])
def test_a_run_directory_that_is_a_regular_file_is_refused(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "out"
    blocker.write_text("my data")
    directory = blocker if where == "directory" else blocker / "run"
    what = "is" if where == "directory" else f"is inside {blocker}, which is"
    for resume in (False, True):
        with pytest.raises(RunDirectoryError, match=rf"^run directory {directory} {what} a regular file, not a "
                                                    r"directory; choose another directory$"):
            check_run_directory(directory, resume=resume, overwrite=False)
    with pytest.raises(RunDirectoryError, match="a regular file, not a directory"):
        RunLock(directory).acquire()
    assert blocker.read_text() == "my data"


def test_resume_and_overwrite_together_are_refused(tmp_path: Path) -> None:
    a_run(tmp_path)
    with pytest.raises(RunDirectoryError, match="contradict each other"):
        check_run_directory(tmp_path, resume=True, overwrite=True)
    assert (tmp_path / "metrics.jsonl").exists()


# ------------------------------------------------------------------ the lock
def test_a_second_run_on_a_directory_fails_at_once_naming_the_holder(tmp_path: Path) -> None:
    with RunLock(tmp_path / "run") as lock:
        assert lock.held
        with pytest.raises(RunLockedError, match=rf"^run directory {tmp_path / 'run'} is in use by another run "
                                                 rf"\(pid {os.getpid()} on .+, since \d{{4}}-\d\d-\d\d "
                                                 r"\d\d:\d\d:\d\d [+-]\d{4}\); wait for it to finish or choose "
                                                 r"another directory$"):
            RunLock(tmp_path / "run").acquire()
    with RunLock(tmp_path / "run"):  # released on exit
        pass


def test_the_lock_goes_with_its_holder_process(tmp_path: Path) -> None:
    # the holder ends without releasing (os._exit: no finally, no __exit__), as a killed run would
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys\nfrom minitorch_accum.train.run_lock import RunLock\n"
         f"RunLock({str(tmp_path)!r}).acquire()\nprint('held', flush=True)\nsys.stdin.readline()\nos._exit(0)\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[2])
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunLockedError, match=rf"\(pid {holder.pid} on "):
            RunLock(tmp_path).acquire()
    finally:
        holder.communicate("done\n", timeout=60)
    with RunLock(tmp_path):
        pass


def test_a_lock_on_a_read_only_directory_is_a_one_line_error(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.open

    def read_only_open(path, flags, *args, **kwargs):
        if os.fspath(path).endswith(".lock"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", read_only_open)
    with pytest.raises(RunDirectoryError, match=rf"^cannot lock run directory {tmp_path}: cannot open "
                                                rf"{tmp_path / '.lock'}: Read-only file system \(EROFS\)$"):
        RunLock(tmp_path).acquire()

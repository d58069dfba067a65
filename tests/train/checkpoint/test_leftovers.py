"""Leftovers: what a save names temporarily is cleaned up once its writer is gone and never while
it may still be writing; format-1 checkpoints are recognized so that clear() removes them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from minitorch_accum.train.checkpoint import FileCheckpointer
from minitorch_accum.train.checkpoint.leftovers import (
    HOST,
    is_legacy_checkpoint,
    process_alive,
    remove_leftovers,
    temporary_name,
)


def dead_pid() -> int:
    """A PID no process can have: one above the kernel's maximum."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def interrupted_save(path: Path) -> Path:
    path.mkdir()
    (path / "model.safetensors").write_bytes(b"partial")
    return path


def test_a_writer_is_alive_unless_it_is_gone_or_this_very_process() -> None:
    assert process_alive(os.getppid())  # the parent of a running test is running
    assert not process_alive(dead_pid())
    # one process saves one checkpoint at a time, so its own leftovers are an earlier life's
    assert not process_alive(os.getpid())


def test_what_this_process_names_temporarily_it_cleans_up_next_time(tmp_path: Path) -> None:
    tmp = interrupted_save(tmp_path / temporary_name("step5", "tmp"))
    doomed = interrupted_save(tmp_path / temporary_name("step4", "del"))
    assert tmp.name == f".step5.tmp-{HOST}-{os.getpid()}"
    assert sorted(remove_leftovers(tmp_path)) == sorted([tmp, doomed])
    assert list(tmp_path.iterdir()) == []


def test_a_live_writer_another_host_or_a_users_files_are_left_alone(tmp_path: Path) -> None:
    kept = [interrupted_save(tmp_path / f".step5.tmp-{HOST}-{os.getppid()}"),
            interrupted_save(tmp_path / f".step5.tmp-elsewhere-{dead_pid()}"),
            tmp_path / f".notes.tmp-{HOST}-{dead_pid()}"]
    kept[2].mkdir()
    (kept[2] / "draft.txt").write_text("the user's")
    (tmp_path / f".latest.old-{dead_pid()}").mkdir()  # no version wrote this: not ours
    assert remove_leftovers(tmp_path) == []
    assert len(list(tmp_path.iterdir())) == 4


def test_an_old_copy_comes_back_when_it_is_the_only_one_and_goes_when_it_is_not(tmp_path: Path) -> None:
    only = interrupted_save(tmp_path / f".A.old-{dead_pid()}")
    extra = interrupted_save(tmp_path / f".B.old-{dead_pid()}")
    interrupted_save(tmp_path / "B")
    latest_tmp = tmp_path / f".latest.tmp-{HOST}-{dead_pid()}"
    latest_tmp.write_text("A\n")
    assert sorted(remove_leftovers(tmp_path)) == sorted([only, extra, latest_tmp])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["A", "B"]
    assert (tmp_path / "A" / "model.safetensors").read_bytes() == b"partial"


def format_1_checkpoint(path: Path, tag: str | None = None) -> Path:
    """A checkpoint directory as versions before format 2 wrote it."""
    path.mkdir(parents=True)
    (path / "model.safetensors").write_bytes(b"weights")
    record = {"format": 1, "tag": tag or path.name, "files": {"model.safetensors": "0" * 64}, "state": {"step": 3}}
    (path / "state.json").write_text(json.dumps(record))
    return path


def test_a_format_1_checkpoint_is_recognized_only_as_written(tmp_path: Path) -> None:
    assert is_legacy_checkpoint(format_1_checkpoint(tmp_path / "step3"))
    assert not is_legacy_checkpoint(format_1_checkpoint(tmp_path / "copy", tag="step3"))  # a renamed copy
    with_notes = format_1_checkpoint(tmp_path / "step4")
    (with_notes / "notes.txt").write_text("the user's")
    assert not is_legacy_checkpoint(with_notes)
    no_files = format_1_checkpoint(tmp_path / "step5")
    record = json.loads((no_files / "state.json").read_text())
    del record["files"]
    (no_files / "state.json").write_text(json.dumps(record))
    assert not is_legacy_checkpoint(no_files)


def test_clear_removes_format_1_checkpoints_with_the_current_ones(tmp_path: Path) -> None:
    ckpt = FileCheckpointer(tmp_path)
    ckpt.save("step6", {"model": {"w": np.zeros(2, dtype=np.float32)}}, {"step": 6})
    legacy = format_1_checkpoint(tmp_path / "step3")
    copy = format_1_checkpoint(tmp_path / "mine", tag="step3")
    assert ckpt.library_entries() == [tmp_path / "latest", legacy, tmp_path / "step6"]
    ckpt.clear()
    assert list(tmp_path.iterdir()) == [copy]

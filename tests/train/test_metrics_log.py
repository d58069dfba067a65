"""MetricsLog: a torn last line does not block a resume, other damage is named, writes never tear."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from minitorch_accum.train.metrics import MetricsLog, MetricsLogError


def line(step: int, kind: str = "train") -> dict:
    return {"kind": kind, "epoch": 0, "step": step, "loss": 1.0 / step}


def written_log(path: Path, steps: int) -> MetricsLog:
    log = MetricsLog(path)
    log.reset()
    for step in range(1, steps + 1):
        log.write(line(step))
    return log


def lines_of(path: Path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(raw) for raw in text.splitlines()]


@pytest.mark.parametrize("tail", [b'{"kind": "train", "epoch": 0, "st', b"\x00" * 40])
def test_a_torn_last_line_is_dropped_and_reported_on_resume(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "metrics.jsonl"
    written_log(path, 4)
    with path.open("ab") as handle:  # a kill (or a crash that left zeros) while writing line 5
        handle.write(tail)
    log = MetricsLog(path)
    note = log.truncate_after(3)
    assert note == f"{path}: dropped a torn last line ({len(tail)} bytes; the run stopped while writing it)"
    assert log.notes == [note]
    assert [r["step"] for r in log.records] == [1, 2, 3]
    assert lines_of(path) == [line(1), line(2), line(3)]
    log.write(line(4))
    assert lines_of(path)[-1] == line(4)


def test_a_last_line_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(line(1)) + "\n" + json.dumps(line(2)))
    log = MetricsLog(path)
    assert log.truncate_after(5) is None
    assert lines_of(path) == [line(1), line(2)]


@pytest.mark.parametrize("bad, message", [("{not json", r"line 2: not valid JSON \(Expecting property name"),
                                          ("[1, 2]", "line 2: expected a JSON object, got list"),
                                          ('{"step": "3"}', "line 2: 'step' is '3', not an integer")])
def test_a_malformed_line_before_the_end_names_the_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    path = tmp_path / "metrics.jsonl"
    original = json.dumps(line(1)) + "\n" + bad + "\n" + json.dumps(line(3)) + "\n"
    path.write_text(original)
    with pytest.raises(MetricsLogError, match=rf"^{path}, {message}"):
        MetricsLog(path).truncate_after(3)
    assert path.read_text() == original  # not rewritten: a user may want to repair it


def test_an_append_after_a_torn_line_does_not_merge_with_it(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    written_log(path, 2)
    with path.open("ab") as handle:
        handle.write(b'{"kind": "valid", "lo')
    log = MetricsLog(path)  # used without truncate_after, as a plain appender would
    log.write(line(3))
    assert lines_of(path) == [line(1), line(2), line(3)]
    assert len(log.notes) == 1 and "dropped a torn last line (21 bytes" in log.notes[0]


def _fail_writes_to(monkeypatch: pytest.MonkeyPatch, name_part: str, after_bytes: int = 0) -> None:
    """os.write to a file whose path contains ``name_part`` writes ``after_bytes`` then fails
    with ENOSPC, as a full disk does in the middle of a line."""
    real = os.write

    def write(fd: int, data: bytes) -> int:
        if name_part in os.readlink(f"/proc/self/fd/{fd}"):
            if after_bytes and len(data) > after_bytes:
                return real(fd, bytes(data)[:after_bytes])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)
    monkeypatch.setattr(os, "write", write)


def test_a_full_disk_while_appending_leaves_no_partial_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.jsonl"
    log = written_log(path, 2)
    before = path.read_bytes()
    _fail_writes_to(monkeypatch, "metrics.jsonl", after_bytes=10)
    with pytest.raises(MetricsLogError, match=rf"^cannot write {path}: No space left on device \(ENOSPC\)$"):
        log.write(line(3))
    assert path.read_bytes() == before
    assert [r["step"] for r in log.records] == [1, 2]


def test_a_full_disk_while_truncating_leaves_the_log_unchanged(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.jsonl"
    written_log(path, 4)
    before = path.read_bytes()
    _fail_writes_to(monkeypatch, ".metrics.jsonl.tmp")
    with pytest.raises(MetricsLogError, match=rf"^cannot rewrite {path}: No space left on device \(ENOSPC\) "
                                              r"\(the log is unchanged\)$"):
        MetricsLog(path).truncate_after(2)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]


def test_a_log_in_a_directory_that_is_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("mine")
    log = MetricsLog(tmp_path / "run" / "metrics.jsonl")
    with pytest.raises(MetricsLogError, match=rf"^cannot write {tmp_path / 'run' / 'metrics.jsonl'}: Not a "
                                              r"directory \(ENOTDIR\)$"):
        log.reset()
    with pytest.raises(MetricsLogError, match="Not a directory"):
        log.write(line(1))

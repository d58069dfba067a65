"""metrics.jsonl at its edges: torn last lines of every length (one byte, a whole file with no
newline, longer than the search's chunk, after an empty line), a complete file left alone and
unreported, a fresh file, the file's mode, the errors' words, and what a resumed run keeps."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from minitorch_accum.train import metrics
from minitorch_accum.train.metrics import MetricsLog, MetricsLogError

LINE = {"kind": "train", "step": 1, "loss": 0.5}
WRITTEN = (json.dumps(LINE) + "\n").encode()


def _append_to(tmp_path: Path, before: bytes) -> tuple[MetricsLog, bytes]:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(before)
    log = MetricsLog(path)
    log.write(LINE)
    return log, path.read_bytes()


@pytest.mark.parametrize(("before", "kept"), [
    (b"x", b""),  # one torn byte
    (b'{"kind": "train", "st', b""),  # a whole file and no newline in it
    (b"\n" + b"y" * 10, b"\n"),  # the last newline is the file's first byte
    (b'{"step": 0}\n' + b"z" * (2 * metrics._TAIL_CHUNK + 5), b'{"step": 0}\n'),  # torn over three chunks
])
def test_a_torn_last_line_is_cut_back_to_the_last_newline_before_the_next_line(
        tmp_path: Path, before: bytes, kept: bytes) -> None:
    log, after = _append_to(tmp_path, before)
    assert after == kept + WRITTEN
    assert log.notes == [f"{log.path}: dropped a torn last line ({len(before) - len(kept)} bytes; the run stopped "
                         "while writing it)"]


@pytest.mark.parametrize("before", [b"", b"\n", b'{"step": 0}\n'])
def test_a_file_that_ends_in_a_newline_or_is_empty_is_appended_to_and_nothing_is_reported(
        tmp_path: Path, before: bytes) -> None:
    log, after = _append_to(tmp_path, before)
    assert after == before + WRITTEN and log.notes == []


def test_a_log_that_does_not_exist_yet_is_made_by_its_first_line(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "new.jsonl")  # no reset(), no truncate_after(): the tail check meets an empty file
    log.write(LINE)
    assert log.path.read_bytes() == WRITTEN and log.notes == [] and log.records == [LINE]


def test_the_log_is_made_readable_by_all_and_writable_by_its_owner(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        written, reset = MetricsLog(tmp_path / "a.jsonl"), MetricsLog(tmp_path / "b.jsonl")
        written.write(LINE)
        reset.reset()
    finally:
        os.umask(umask)
    assert (written.path.stat().st_mode & 0o777, reset.path.stat().st_mode & 0o777) == (0o644, 0o644)


def test_a_sync_that_fails_names_the_file_and_the_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl")
    log.write(LINE)

    def fail(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(MetricsLogError) as raised:
        log.sync()
    said = str(raised.value)
    assert said.startswith(f"cannot sync {log.path}: ") and "nput/output error" in said
    MetricsLog(tmp_path / "absent.jsonl").sync()  # nothing written yet: nothing to sync, no error


def test_a_resumed_run_keeps_the_lines_up_to_its_step_a_line_without_a_step_included(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"kind": "valid", "epoch": 0}\n{"kind": "train", "step": 1}\n{"kind": "train", "step": 2}\n')
    log = MetricsLog(path)
    assert log.truncate_after(0) is None
    assert log.records == [{"kind": "valid", "epoch": 0}]  # no step: it belongs to step 0
    assert MetricsLog(tmp_path / "absent.jsonl").truncate_after(3) is None  # a run that wrote nothing yet


def test_a_complete_last_line_without_its_newline_is_read_and_its_errors_name_its_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": "three"}')  # the newline was all the kill cut
    with pytest.raises(MetricsLogError, match=r"line 3: 'step' is 'three', not an integer$"):
        MetricsLog(path).truncate_after(5)
    path.write_text('{"step": 1}\n{"step": 2}')
    log = MetricsLog(path)
    assert log.truncate_after(5) is None and log.records == [{"step": 1}, {"step": 2}]
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n'  # rewritten whole, its newline restored


def test_a_line_that_is_not_utf8_is_named_by_its_number(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": "\xff"}\n')
    with pytest.raises(MetricsLogError, match=rf"^{path}, line 2: not UTF-8 text$"):
        MetricsLog(path).truncate_after(5)


def test_a_new_run_empties_the_log_an_earlier_run_left(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(WRITTEN * 3)
    log = MetricsLog(path)
    log.reset()
    assert path.read_bytes() == b"" and log.records == []


def test_a_log_that_cannot_be_opened_or_read_is_named_with_the_cause(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "metrics.jsonl"
    folder.mkdir()  # a directory where the log should be
    with pytest.raises(MetricsLogError, match=r"^cannot read .*metrics\.jsonl: "):
        MetricsLog(folder).truncate_after(1)
    log = MetricsLog(tmp_path / "other.jsonl")
    log.write(LINE)
    real_open = os.open

    def refuse(path: object, flags: int, *args: object) -> int:
        if Path(str(path)) == log.path:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(MetricsLogError) as raised:
        log.sync()
    said = str(raised.value)
    assert said.startswith(f"cannot sync {log.path}: ") and "ermission denied" in said

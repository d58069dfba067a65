"""Durable files: a regular file read without following links or blocking, and a new file never
written over another (the atomic replace is tested through config saves, tests/test_config.py)."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from minitorch_accum.durable_files import (
    NotRegularFileError,
    describe_file_type,
    describe_os_error,
    read_regular_file,
    replace_file_atomically,
    write_new_file,
)


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "data").write_bytes(b"\0\1" * 50_000)
    assert read_regular_file(tmp_path / "data") == b"\0\1" * 50_000


@pytest.mark.parametrize("kind, words", [("symlink", "a symlink"), ("fifo", "a FIFO"), ("directory", "a directory")])
def test_anything_but_a_regular_file_is_refused_without_reading_it(tmp_path: Path, kind: str, words: str) -> None:
    path = tmp_path / "data"
    if kind == "symlink":
        (tmp_path / "target").write_bytes(b"bytes")
        path.symlink_to(tmp_path / "target")
    elif kind == "fifo":  # opening it to read would block for ever
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(NotRegularFileError, match=rf"{path} is {words}, not a regular file") as error:
        read_regular_file(path)
    assert error.value.file_type == words


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing")


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_new_file_never_replaces_what_is_there(tmp_path: Path, kind: str) -> None:
    (tmp_path / "theirs").write_bytes(b"theirs")
    path = tmp_path / "new"
    if kind == "file":
        path.write_bytes(b"theirs")
    else:
        path.symlink_to(tmp_path / "theirs")
    with pytest.raises(FileExistsError):
        write_new_file(path, b"mine")
    assert path.read_bytes() == b"theirs" and (tmp_path / "theirs").read_bytes() == b"theirs"



def test_the_error_for_a_file_that_is_not_regular_names_the_path(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFileError) as error:
        read_regular_file(tmp_path / "fifo")
    assert error.value.path == tmp_path / "fifo" and error.value.file_type == "a FIFO"


def _as_if_regular(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """The path looks like a regular file to the first check: it is swapped between that check and the open."""
    real_lstat, regular = os.lstat, os.stat(__file__)

    def lstat(candidate: os.PathLike) -> os.stat_result:
        return regular if Path(candidate) == path else real_lstat(candidate)

    monkeypatch.setattr(os, "lstat", lstat)


def test_a_symlink_swapped_in_after_the_check_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "secret").write_bytes(b"not yours")
    (tmp_path / "data").symlink_to(tmp_path / "secret")
    _as_if_regular(monkeypatch, tmp_path / "data")
    with pytest.raises(OSError) as error:
        read_regular_file(tmp_path / "data")
    assert error.value.errno == errno.ELOOP


def test_a_fifo_swapped_in_after_the_check_is_refused_without_blocking(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "data"
    os.mkfifo(path)
    _as_if_regular(monkeypatch, path)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_regular_file(path)
        except BaseException as exc:  # handed to the test's thread
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    blocked = reader.is_alive()
    if blocked:  # open a writer so that the reader's open returns and the thread ends
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    assert not blocked, "opening a FIFO to read it blocked (no writer)"
    [error] = outcome
    assert isinstance(error, NotRegularFileError) and error.path == path and error.file_type == "a FIFO"
    assert str(error) == f"{path} is a FIFO, not a regular file"


@pytest.mark.parametrize("error, words", [
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device (ENOSPC)"),
    (OSError("the disk went away"), "the disk went away"),
    (OSError(), "OSError"),
    (PermissionError(), "PermissionError"),
])
def test_an_os_error_is_described_by_its_cause_and_errno_name(error: OSError, words: str) -> None:
    assert describe_os_error(error) == words


def test_a_mode_of_no_known_file_type_is_described_as_not_a_regular_file() -> None:
    assert describe_file_type(0) == "not a regular file"
    assert describe_file_type(stat.S_IFSOCK | 0o600) == "a socket"


@pytest.mark.parametrize("write", ["new", "replace"])
def test_written_files_are_readable_by_all_and_writable_by_their_owner_only(tmp_path: Path, write: str) -> None:
    previous = os.umask(0o022)
    try:
        if write == "new":
            write_new_file(tmp_path / "data", b"bytes")
        else:
            replace_file_atomically(tmp_path / "data", b"bytes", tmp_path / ".data.tmp")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "data").st_mode) == 0o644


def test_a_replace_never_writes_through_a_symlink_at_the_temporary_name(tmp_path: Path) -> None:
    (tmp_path / "theirs").write_bytes(b"theirs")
    (tmp_path / ".data.tmp").symlink_to(tmp_path / "theirs")
    with pytest.raises(OSError) as error:
        replace_file_atomically(tmp_path / "data", b"mine", tmp_path / ".data.tmp")
    assert error.value.errno == errno.ELOOP
    assert (tmp_path / "theirs").read_bytes() == b"theirs" and not (tmp_path / "data").exists()


def test_a_failed_replace_raises_its_own_error_even_when_the_cleanup_fails_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "inside").write_bytes(b"")  # a non-empty directory cannot be replaced by a file

    def unlink(path: os.PathLike) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(IsADirectoryError):
        replace_file_atomically(tmp_path / "data", b"bytes", tmp_path / ".data.tmp")

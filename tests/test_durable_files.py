"""Durable files: a regular file read without following links or blocking, a new file never
written over another, a file replaced atomically (synced before the rename, the directory after;
a failed write leaves the old file), and an output path refused before the work when it could not
be written after it."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import pytest

from minitorch_accum.durable_files import (
    NotRegularFileError,
    UnwritableOutputError,
    check_output_path,
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


def test_a_replace_fsyncs_the_file_before_the_rename_and_the_directory_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: os.PathLike, target: os.PathLike) -> None:
        events.append(("replace", f"{source} -> {target}"))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    replace_file_atomically(tmp_path / "run.json", b"new", tmp_path / ".run.json.tmp")
    assert events == [("fsync", str(tmp_path / ".run.json.tmp")),
                      ("replace", f"{tmp_path / '.run.json.tmp'} -> {tmp_path / 'run.json'}"),
                      ("fsync", str(tmp_path))]
    assert (tmp_path / "run.json").read_bytes() == b"new"


def test_a_failing_replace_leaves_the_old_file_intact_and_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "run.json").write_bytes(b"old")

    def full_disk(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match=r"No space left on device"):
        replace_file_atomically(tmp_path / "run.json", b"new", tmp_path / ".run.json.tmp")
    assert [path.name for path in tmp_path.iterdir()] == ["run.json"]
    assert (tmp_path / "run.json").read_bytes() == b"old"


def test_a_failed_replace_raises_its_own_error_even_when_the_cleanup_fails_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "inside").write_bytes(b"")  # a non-empty directory cannot be replaced by a file

    def unlink(path: os.PathLike) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "unlink", unlink)
    with pytest.raises(IsADirectoryError):
        replace_file_atomically(tmp_path / "data", b"bytes", tmp_path / ".data.tmp")


# ------------------------------------------------------------------ outputs checked before the work
def _entries(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _refused(path: Path, what: str = "--trace-out", directory: bool = False) -> str:
    with pytest.raises(UnwritableOutputError) as error:
        check_output_path(path, what, directory=directory)
    assert error.value.path == path and "\n" not in str(error.value)
    return str(error.value)


def test_a_file_output_in_a_missing_directory_is_refused_and_no_directory_made(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "deeper" / "t.json"
    assert _refused(path) == (f"--trace-out {path}: its directory {path.parent} does not exist; create it first "
                              f"(mkdir -p {path.parent}) or choose another path")
    assert _entries(tmp_path) == []


@pytest.mark.parametrize("below", ["t.json", "sub/t.json"])
def test_a_file_in_the_way_of_an_output_is_named_and_left_alone(tmp_path: Path, below: str) -> None:
    (tmp_path / "afile").write_text("mine")
    path = tmp_path / "afile" / below
    assert _refused(path) == (f"--trace-out {path} is inside {tmp_path / 'afile'}, which is a regular file, "
                              "not a directory; choose another path")
    assert _refused(path, "--out", directory=True).endswith("which is a regular file, not a directory; "
                                                           "choose another directory")
    assert (tmp_path / "afile").read_text() == "mine" and _entries(tmp_path) == ["afile"]


def test_a_file_output_that_is_a_directory_or_a_fifo_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t.json").mkdir()
    assert _refused(tmp_path / "t.json") == f"--trace-out {tmp_path / 't.json'} is a directory; give a file name"
    os.mkfifo(tmp_path / "f.png")  # opening it to write would wait for a reader
    assert _refused(tmp_path / "f.png", "--figure") == (f"--figure {tmp_path / 'f.png'} is a FIFO, not a regular "
                                                        "file; choose another path")


def test_an_accepted_output_leaves_everything_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text("kept")
    before = os.stat(tmp_path / "old.json")
    assert check_output_path(tmp_path / "old.json", "--trace-out") == tmp_path / "old.json"
    assert check_output_path(tmp_path / "new.json", "--trace-out") == tmp_path / "new.json"
    assert check_output_path(tmp_path / "a" / "b" / "run", "--out", directory=True) == tmp_path / "a" / "b" / "run"
    assert check_output_path(Path("relative.json"), "--trace-out") == Path("relative.json")  # the working directory
    after = os.stat(tmp_path / "old.json")
    assert (tmp_path / "old.json").read_text() == "kept" and after.st_mtime_ns == before.st_mtime_ns
    assert _entries(tmp_path) == ["old.json"]  # no probe file left, no directory made


def test_a_directory_that_takes_no_files_is_refused_by_what_creating_one_said(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # what a user who is not root meets in a directory of someone else's (root ignores permission bits)
    real = os.open

    def denied(path: os.PathLike, flags: int, *args: object) -> int:
        if Path(path).parent == tmp_path and flags & os.O_CREAT:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real(path, flags, *args)

    monkeypatch.setattr(os, "open", denied)
    assert _refused(tmp_path / "t.json") == (f"--trace-out {tmp_path / 't.json'}: cannot create files in {tmp_path}: "
                                             "Permission denied (EACCES); choose a writable directory")
    assert _refused(tmp_path / "new" / "run", "run directory", directory=True) == (
        f"run directory {tmp_path / 'new' / 'run'}: cannot create files in {tmp_path}: Permission denied (EACCES); "
        "choose a writable directory")


def test_a_read_only_mount_is_refused_for_a_file_and_for_a_directory_under_it(read_only: Path) -> None:
    assert _refused(read_only / "t.json") == (f"--trace-out {read_only / 't.json'}: cannot create files in "
                                              f"{read_only}: Read-only file system (EROFS); choose a writable "
                                              "directory")
    assert _refused(read_only / "a" / "run", "--out", directory=True) == (
        f"--out {read_only / 'a' / 'run'}: cannot create files in {read_only}: Read-only file system (EROFS); "
        "choose a writable directory")
    assert _refused(read_only, "--out", directory=True) == (f"--out {read_only}: cannot create files in it: "
                                                            "Read-only file system (EROFS); choose a writable "
                                                            "directory")

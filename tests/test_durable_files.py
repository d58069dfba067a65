"""Durable files: a regular file read without following links or blocking, and a new file never
written over another (the atomic replace is tested through config saves, tests/test_config.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from minitorch_accum.durable_files import (
    NotRegularFileError,
    read_regular_file,
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


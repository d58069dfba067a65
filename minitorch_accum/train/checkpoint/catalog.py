"""Which checkpoints a directory holds: this library's checkpoint directories, newest first, and ``latest``.

A directory counts only when it is a real (not symlinked) directory whose state.json is
ours, of this format, and names this very directory: a user's directory, or a copy of a
checkpoint under another name, is never listed, so it is never pruned or cleared.
Nothing here hashes the arrays; loading verifies them.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, NamedTuple

from minitorch_accum.durable_files import describe_file_type, describe_os_error
from minitorch_accum.train.checkpoint.errors import CheckpointError
from minitorch_accum.train.checkpoint.record import CHECKPOINT_FORMAT, LIBRARY, STATE_FILE, is_plain_name, parse_record

__all__ = ["LATEST", "CatalogEntry", "list_entries", "looks_intact", "newest_first", "read_latest_pointer", "scan"]

#: the file naming the current checkpoint
LATEST = "latest"
# a pointer holds one name and a newline; anything longer is not one
_POINTER_LIMIT = 4096


class CatalogEntry(NamedTuple):
    """A checkpoint directory this library wrote, with its record as read (not yet verified)."""

    path: Path
    record: dict[str, Any]


def list_entries(directory: Path) -> list[os.DirEntry]:
    """The entries of ``directory``, read at once; none when it cannot be listed (missing,
    not a directory, unreadable), as there is then nothing of ours to find in it."""
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError:
        return []


def scan(directory: Path) -> list[CatalogEntry]:
    """Every checkpoint directory this library wrote in ``directory``, in no order."""
    found = []
    for entry in list_entries(directory):
        if entry.name.startswith(".") or entry.name == LATEST or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        record = _unverified_record(path)
        if (isinstance(record, dict) and record.get("library") == LIBRARY
                and record.get("format") == CHECKPOINT_FORMAT and record.get("directory") == entry.name
                and type(record.get("sequence")) is int and isinstance(record.get("tag"), str)
                and isinstance(record.get("groups"), dict)):
            found.append(CatalogEntry(path, record))
    return found


def _unverified_record(path: Path) -> Any:
    """What ``path``'s state.json holds as JSON, when it is a regular file that parses; else None."""
    try:
        if not stat.S_ISREG(os.lstat(path / STATE_FILE).st_mode):
            return None
        return json.loads((path / STATE_FILE).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def newest_first(entries: list[CatalogEntry]) -> list[CatalogEntry]:
    """``entries`` by save sequence, the newest first."""
    return sorted(entries, key=lambda entry: entry.record["sequence"], reverse=True)


def looks_intact(entry: CatalogEntry) -> bool:
    """Cheap check (no hashing of the arrays): the record verifies and every file is a
    regular file of the recorded size."""
    try:
        parse_record((entry.path / STATE_FILE).read_bytes(), entry.path)
        for group in entry.record["groups"].values():
            info = os.lstat(entry.path / group["file"])
            if not stat.S_ISREG(info.st_mode) or info.st_size != group["bytes"]:
                return False
    except (OSError, CheckpointError, KeyError, TypeError):
        return False
    return True


def read_latest_pointer(directory: Path) -> Path | None:
    """The checkpoint ``directory/latest`` points to (which may be missing), or None when there
    is no ``latest``. CheckpointError when the pointer is not a regular file or names a path
    outside ``directory``."""
    pointer = directory / LATEST
    try:
        info = os.lstat(pointer)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read {pointer}: {describe_os_error(exc)}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"checkpoint pointer {pointer} is {describe_file_type(info.st_mode)}, "
                              "not a regular file")
    if info.st_size > _POINTER_LIMIT:
        raise CheckpointError(f"checkpoint pointer {pointer} is corrupt: {info.st_size} bytes long")
    try:
        name = pointer.read_bytes().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint pointer {pointer} cannot be read ({exc})") from exc
    if not name:
        raise CheckpointError(f"checkpoint pointer {pointer} is empty")
    if not is_plain_name(name) or os.path.isabs(name):
        raise CheckpointError(f"checkpoint pointer {pointer} names {name!r}, which leaves {directory}")
    if name.startswith("."):
        raise CheckpointError(f"checkpoint pointer {pointer} names {name!r}, a temporary directory")
    return directory / name

"""What interrupted saves leave behind, and checkpoints of earlier versions: named, recognized, cleaned up.

A save writes under a temporary name ``.<name>.tmp-<host>-<pid>`` and removes a
checkpoint by renaming it to ``.<name>.del-<host>-<pid>`` first; earlier versions wrote
``.<tag>.tmp-<pid>`` and ``.<tag>.old-<pid>``. Such a leftover is cleaned up only when
its writer is gone (same host, PID not running) and it holds nothing but what a save
writes, so a live save and a user's files are never touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
from pathlib import Path

from minitorch_accum.train.checkpoint.catalog import LATEST, list_entries
from minitorch_accum.train.checkpoint.record import ARRAYS_SUFFIX, STATE_FILE

__all__ = ["HOST", "is_legacy_checkpoint", "process_alive", "remove_leftovers", "temporary_name"]

#: this machine's name as it appears in temporary names (one plain file-name component)
HOST = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "localhost"
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old|del)-(?:(?P<host>.+)-)?(?P<pid>[0-9]+)")


def temporary_name(name: str, kind: str) -> str:
    """The name this process gives ``name`` while writing it (``kind`` "tmp") or removing it ("del")."""
    return f".{name}.{kind}-{HOST}-{os.getpid()}"


def process_alive(pid: int) -> bool:
    """Whether a leftover's writer may still be writing it.

    Our own PID counts as gone: saves in one process run one after another (the run lock
    keeps other processes out), and a restarted container often gets the same PID back."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):  # EPERM: alive under another user; anything odd: assume alive
        return True
    return True


def _holds_only_checkpoint_files(path: Path) -> bool:
    """A temporary directory holds only what a save writes; anything else is left alone."""
    try:
        with os.scandir(path) as entries:
            return all(entry.is_file(follow_symlinks=False)
                       and (entry.name == STATE_FILE or entry.name.endswith(ARRAYS_SUFFIX)) for entry in entries)
    except OSError:
        return False


def is_legacy_checkpoint(path: Path) -> bool:
    """A format-1 checkpoint directory as earlier versions wrote it (cleared, never loaded)."""
    try:
        record = json.loads((path / STATE_FILE).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return (isinstance(record, dict) and record.get("format") == 1 and record.get("tag") == path.name
            and isinstance(record.get("files"), dict) and _holds_only_checkpoint_files(path))


def remove_leftovers(directory: Path) -> list[Path]:
    """Remove what interrupted saves of processes that are gone left in ``directory``; return those paths.

    Temporary directories are removed, and so is a temporary ``latest``. An earlier
    version's ``.<tag>.old-<pid>`` may be the only copy of a checkpoint (a kill between its
    two renames): it is renamed back to ``<tag>`` when that is missing, removed otherwise."""
    touched = []
    for entry in list_entries(directory):
        match = _LEFTOVER.fullmatch(entry.name)
        if match is None:
            continue
        host = match["host"]
        if (host is not None and host != HOST) or process_alive(int(match["pid"])):
            continue
        if match["kind"] == "old" and match["name"] == LATEST:
            continue  # never written as a directory by any version
        path = Path(entry.path)
        try:
            if entry.is_file(follow_symlinks=False) and match["name"] == LATEST and match["kind"] == "tmp":
                os.unlink(path)
            elif not entry.is_dir(follow_symlinks=False) or not _holds_only_checkpoint_files(path):
                continue
            elif match["kind"] == "old" and not os.path.lexists(directory / match["name"]):
                os.rename(path, directory / match["name"])
            else:
                shutil.rmtree(path)
        except OSError:
            continue  # best effort: a leftover that cannot be removed now is tried again next save
        touched.append(path)
    return touched

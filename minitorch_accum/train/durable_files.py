"""File writes that survive a kill or a full disk, and OS errors told in one line.

Checkpoints, the metrics log and the run lock all write files a user may later
resume from, so they share these few primitives: write every byte or fail, fsync
before a rename makes the data visible, and describe an ``OSError`` as its cause
("No space left on device (ENOSPC)") for a one-line message that names the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

__all__ = ["describe_os_error", "fsync_directory", "replace_file_atomically", "write_all"]


def describe_os_error(exc: OSError) -> str:
    """The cause of ``exc`` for a one-line message: its text and errno name, without the path."""
    text = exc.strerror or str(exc) or type(exc).__name__
    name = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    return f"{text} ({name})" if name else text


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``: os.write may write less than asked (a signal, a pipe)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_directory(path: Path) -> None:
    """Make a rename or a new entry in ``path`` durable; best effort.

    Some filesystems cannot fsync a directory (EINVAL), and by the time this runs the
    rename has already happened, so a failure here must not undo it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_file_atomically(path: Path, data: bytes, tmp: Path) -> None:
    """Replace ``path`` by a file holding ``data``: readers see the old file or the new one, never a mix.

    ``tmp`` (in the same directory) is written and fsynced first; on an OSError it is
    removed and the error re-raised, so ``path`` is untouched and nothing is left behind."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(path.parent)

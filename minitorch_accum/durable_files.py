"""Files a run resumes from: written so a kill or a full disk cannot tear them, read without
following links, and OS errors told in one line.

Checkpoints, the metrics log, the run lock and the final parameters all write files a user
may later resume from, so they share these few primitives: write every byte or fail,
fsync before a rename makes the data visible, read only a regular file (a FIFO would
block the read, a symlink could lead out of the directory), and describe an
``OSError`` as its cause ("No space left on device (ENOSPC)") for a one-line message
that names the path. A leaf module, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

__all__ = [
    "NotRegularFileError",
    "UnwritableOutputError",
    "check_output_path",
    "describe_file_type",
    "describe_os_error",
    "fsync_directory",
    "read_regular_file",
    "replace_file_atomically",
    "write_all",
    "write_new_file",
]

_FILE_TYPES = ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"),
               (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
               (stat.S_ISBLK, "a device"))


class NotRegularFileError(OSError):
    """A path that had to be a regular file is something else; ``file_type`` says what."""

    def __init__(self, path: Path, file_type: str) -> None:
        super().__init__(f"{path} is {file_type}, not a regular file")
        self.path = path
        self.file_type = file_type


class UnwritableOutputError(OSError):
    """An output path that could not be written; the message names it, says why and what to do."""

    def __init__(self, message: str, path: Path) -> None:
        super().__init__(message)
        self.path = path


def describe_os_error(exc: OSError) -> str:
    """The cause of ``exc`` for a one-line message: its text and errno name, without the path."""
    text = exc.strerror or str(exc) or type(exc).__name__
    name = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    return f"{text} ({name})" if name else text


def describe_file_type(mode: int) -> str:
    """What an ``st_mode`` is, in words for a message: "a regular file", "a symlink", "a FIFO"..."""
    return next((name for test, name in _FILE_TYPES if test(mode)), "not a regular file")


def read_regular_file(path: Path) -> bytes:
    """The bytes of ``path``, refusing a symlink, FIFO, directory or device.

    Raises FileNotFoundError when it is missing, NotRegularFileError when it is not a
    regular file, and any other OSError of the read as it is."""
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFileError(path, describe_file_type(info.st_mode))
    # O_NOFOLLOW and the fstat below close the gap between the lstat and the open
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, describe_file_type(mode))
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


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


def _open_for_writing(path: Path, exclusive: bool) -> int:
    """A descriptor to write ``path`` from its start, never through a symlink; ``exclusive``:
    it must not exist yet."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_EXCL if exclusive else os.O_TRUNC)
    return os.open(path, flags, 0o644)


def _write_synced_and_close(fd: int, data: bytes) -> None:
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``data``, fsynced: a rename that makes it
    visible must not be able to expose a file whose bytes are still in flight."""
    _write_synced_and_close(_open_for_writing(path, exclusive=True), data)


def replace_file_atomically(path: Path, data: bytes, tmp: Path) -> None:
    """Replace ``path`` by a file holding ``data``: readers see the old file or the new one, never a mix.

    ``tmp`` (in the same directory) is written and fsynced first; on an OSError it is
    removed and the error re-raised, so ``path`` is untouched and nothing is left behind."""
    fd = _open_for_writing(tmp, exclusive=False)
    try:
        _write_synced_and_close(fd, data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_directory(path.parent)


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (``.`` at worst for a relative path)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def _cannot_create_files_in(directory: Path) -> OSError | None:
    """Why no file can be created in ``directory``, found by creating and removing one; None when it can."""
    try:
        fd, name = tempfile.mkstemp(prefix=".write-check-", dir=directory)
    except OSError as exc:
        return exc
    os.close(fd)
    os.unlink(name)
    return None


def _refuse(what: str, path: Path, why: str, fix: str) -> UnwritableOutputError:
    return UnwritableOutputError(f"{what} {path}{why}; {fix}", path)


def check_output_path(path: str | os.PathLike, what: str, directory: bool = False) -> Path:
    """Refuse now an output that could not be written when the work that fills it is done.

    A file (``directory=False``): its parent must exist and be a directory files can be
    created in (it is never created for it: a typo would otherwise make a directory
    somewhere unexpected, at the root as root); the file itself, when it exists, must be a
    regular file that opens for writing. A directory (a run's ``--out``): it and its parents
    may be missing (they are created when the work starts), but no component may be
    anything but a directory, and the nearest existing one must take new files.

    ``what`` names the path in the message (``--trace-out``, ``run directory``); raises
    UnwritableOutputError, one line naming the path, why, and what to do. Returns the path."""
    target = Path(path)
    if directory:
        existing = _nearest_existing(target)
        fix = "choose another directory"
    else:
        fix = "choose another path"
        if os.path.exists(target):  # follows a symlink, as the writers do
            mode = os.stat(target).st_mode
            if stat.S_ISDIR(mode):
                raise _refuse(what, target, " is a directory", "give a file name")
            if not stat.S_ISREG(mode):
                raise _refuse(what, target, f" is {describe_file_type(mode)}, not a regular file", fix)
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))  # neither truncated nor touched
            except OSError as exc:
                raise _refuse(what, target, f": cannot write it: {describe_os_error(exc)}", fix) from None
        existing = _nearest_existing(target.parent)
    if not os.path.isdir(existing):  # follows a symlink: a link to a directory is a directory
        kind = describe_file_type(os.stat(existing).st_mode) if os.path.exists(existing) else "a broken symlink"
        where = " is" if existing == target else f" is inside {existing}, which is"
        raise _refuse(what, target, f"{where} {kind}, not a directory", fix)
    if not directory and existing != target.parent:
        raise _refuse(what, target, f": its directory {target.parent} does not exist",
                      f"create it first (mkdir -p {target.parent}) or choose another path")
    cause = _cannot_create_files_in(existing)
    if cause is not None:
        place = "it" if existing == target else existing
        raise _refuse(what, target, f": cannot create files in {place}: {describe_os_error(cause)}",
                      "choose a writable directory")
    return target

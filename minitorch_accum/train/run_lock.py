"""One run per run directory: an exclusive lock held for as long as the run writes there.

``fcntl.flock`` on ``DIR/.lock``: the kernel drops the lock when the process ends,
however it ends (kill -9 included), so there is never a stale lock to clean up by
hand. The holder writes its PID, host and start time into the file so that a second
run can say who is in the way. The file itself stays: removing it on release would
let a third process lock a new file while a second still waits on the old one.

flock is not reliable on every network filesystem (NFS before v4 may not lock at
all); on a local disk it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import time
from pathlib import Path
from types import TracebackType

from minitorch_accum.durable_files import describe_os_error
from minitorch_accum.train.run_directory import RunDirectoryError, require_directory

__all__ = ["RunLock", "RunLockedError"]

_LOCK = ".lock"


class RunLockedError(RunDirectoryError):
    """Another process holds the run directory's lock."""


class RunLock:
    """Exclusive use of ``directory`` by this process: ``with RunLock(directory): ...``.

    Entering creates the directory if needed and fails at once (no waiting) with
    RunLockedError when another process holds it: "run directory DIR is in use by another
    run (pid 1234 on host, since 2025-01-01 12:00:00 +0000); wait for it to finish or
    choose another directory". Other problems (a regular file in the way, a read-only
    disk) are RunDirectoryError. Two RunLocks on one directory exclude each other even in
    one process. A forked child shares the lock until it exits."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.path = self.directory / _LOCK
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        if self._fd is not None:
            raise RuntimeError(f"RunLock on {self.directory} is already held by this object")
        require_directory(self.directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirectoryError(f"cannot create run directory {self.directory}: "
                                    f"{describe_os_error(exc)}") from exc
        if os.path.islink(self.path):
            raise RunDirectoryError(f"cannot lock run directory {self.directory}: {self.path} is a symlink; "
                                    "remove it")
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise RunDirectoryError(f"cannot lock run directory {self.directory}: cannot open {self.path}: "
                                    f"{describe_os_error(exc)}") from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise RunDirectoryError(f"cannot lock run directory {self.directory}: {self.path} is not a "
                                        "regular file")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLockedError(f"run directory {self.directory} is in use by another run "
                                     f"({_describe_holder(fd)}); wait for it to finish or choose another "
                                     "directory") from None
            except OSError as exc:
                raise RunDirectoryError(f"cannot lock run directory {self.directory}: "
                                        f"{describe_os_error(exc)}") from exc
        except BaseException:
            os.close(fd)
            raise
        holder = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}
        # the details only help a second run's message; a disk too full to take these few
        # bytes must not stop this run from holding the lock
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode("utf-8"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the directory up (also done by the kernel when the process ends)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # no stale holder details for the next reader
        os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()


def _describe_holder(fd: int) -> str:
    try:
        holder = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return f"pid {int(holder['pid'])} on {holder['host']}, since {holder['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its holder has not written its details yet"

"""A run directory holds one run: starting a new run there must not mix two runs' files.

A run writes ``metrics.jsonl``, ``checkpoints/`` and ``final.safetensors`` into its
directory. :func:`check_run_directory` is called before a run starts: a new run into a
directory that already holds one is refused (the user meant ``--resume``, or wants
``--overwrite``), and ``overwrite`` removes only what this library wrote there.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from minitorch_accum.durable_files import UnwritableOutputError, check_output_path, describe_os_error
from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer

__all__ = ["CHECKPOINTS", "RUN_FILES", "RunCompleteError", "RunDirectoryError", "check_run_directory",
           "require_directory"]

#: the files a run writes at the top of its directory
RUN_FILES = ("metrics.jsonl", "final.safetensors")
#: the sub-directory holding its checkpoints (see FileCheckpointer)
CHECKPOINTS = "checkpoints"
# temporary files an interrupted write of those leaves: NAME.tmp (earlier versions) and
# .NAME.tmp-PID (MetricsLog.truncate_after; the name to use for final.safetensors too)
_LEFTOVER_FILES = re.compile(r"(final\.safetensors|metrics\.jsonl)\.tmp"
                             r"|\.(final\.safetensors|metrics\.jsonl)\.tmp-[0-9]+")


class RunDirectoryError(RuntimeError):
    """A run directory cannot be used: it is a file, it holds another run, it is locked, or
    it cannot be written."""


class RunCompleteError(RunDirectoryError):
    """A resume found the run finished (``final.safetensors`` records it): there is nothing to
    resume. ``maccum train --resume`` says so (rank 0) and exits 0."""

    def __init__(self, message: str, rank: int = 0) -> None:
        super().__init__(message)
        #: the rank that raised it (data-parallel: rank 0 read the directory and says so)
        self.rank = rank


def require_directory(directory: Path) -> None:
    """RunDirectoryError unless ``directory`` is a directory or can be created as one (no
    regular file in the way, at it or above it) and its nearest existing part takes new files
    (not a read-only disk): ``durable_files.check_output_path``'s rule for a directory."""
    try:
        check_output_path(directory, "run directory", directory=True)
    except UnwritableOutputError as exc:
        raise RunDirectoryError(str(exc)) from None


def _is_empty_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def _run_entries(directory: Path) -> list[str]:
    """The names in ``directory`` that a run wrote (``checkpoints/`` when it holds checkpoints
    or ``latest``: a user's files in it are no run)."""
    held = []
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise RunDirectoryError(f"cannot read run directory {directory}: {describe_os_error(exc)}") from exc
    for name in names:
        if name == "metrics.jsonl" and _is_empty_file(directory / name):
            continue  # a run that stopped before its first step (a configuration error): nothing to lose
        if name in RUN_FILES or _LEFTOVER_FILES.fullmatch(name):
            held.append(name)
        elif name == CHECKPOINTS:
            path = directory / name
            if not path.is_dir():
                held.append(name)
            elif FileCheckpointer(path).library_entries():
                held.append(name + "/")
    return held


def check_run_directory(path: str | os.PathLike, resume: bool, overwrite: bool) -> list[Path]:
    """Make sure a run may start in ``path``; return what ``overwrite`` removed.

    - ``path`` is a regular file (or lies under one), or cannot take new files: RunDirectoryError.
    - ``resume``: nothing else is checked here (FileCheckpointer says when there is no
      checkpoint to resume from).
    - a new run into a directory that holds a run (metrics.jsonl, final.safetensors, a
      non-empty checkpoints/): RunDirectoryError suggesting ``--resume`` or ``--overwrite``,
      unless ``overwrite``; then this library's files are removed (metrics.jsonl,
      final.safetensors, their temporary files, and via FileCheckpointer.clear() the
      checkpoints this library wrote); anything else stays. A symlink or directory under one
      of those names is refused rather than removed: this library never writes one.

    Call it while holding the directory's RunLock, so that no other run is writing there."""
    directory = Path(path)
    if resume and overwrite:
        raise RunDirectoryError(f"resume and overwrite contradict each other for {directory}: "
                                "--resume continues the run there, --overwrite replaces it")
    require_directory(directory)
    if resume or not directory.exists():
        return []
    held = _run_entries(directory)
    if not held:
        return []
    if not overwrite:
        raise RunDirectoryError(f"run directory {directory} already holds a run ({', '.join(held)}); "
                                "pass --resume to continue it or --overwrite to replace it")
    return _remove_run(directory, held)


def _remove_run(directory: Path, held: list[str]) -> list[Path]:
    files = [directory / name for name in held if not name.startswith(CHECKPOINTS)]
    for file in files:  # refuse before removing anything, so a refusal changes nothing
        mode = os.lstat(file).st_mode
        if not stat.S_ISREG(mode):
            what = "a symlink" if stat.S_ISLNK(mode) else "a directory" if stat.S_ISDIR(mode) else "not a file"
            raise RunDirectoryError(f"cannot overwrite the run in {directory}: {file.name} is {what}, which this "
                                    "library does not write; move it away first")
    checkpoints = directory / CHECKPOINTS
    if os.path.lexists(checkpoints) and not checkpoints.is_dir():
        raise RunDirectoryError(f"cannot overwrite the run in {directory}: {checkpoints} is a regular file, "
                                "which this library does not write; move it away first")
    try:
        removed = FileCheckpointer(checkpoints).clear()
    except CheckpointError as exc:
        raise RunDirectoryError(f"cannot overwrite the run in {directory}: {exc}") from exc
    for file in files:
        try:
            os.unlink(file)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RunDirectoryError(f"cannot overwrite the run in {directory}: cannot remove {file.name}: "
                                    f"{describe_os_error(exc)}") from exc
        removed.append(file)
    return removed

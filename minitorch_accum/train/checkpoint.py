"""File checkpoints that can be trusted: atomic, verified, never overwriting the last good one.

A checkpoint is a directory ``DIR/checkpoints/<name>/`` holding one safetensors file
per group of arrays (parameters, optimizer state, the gradient arena so a checkpoint
taken mid-window resumes mid-window) and ``state.json``: the caller's state (step,
epoch, loader position, RNG state, counters, any small facts), which groups the
checkpoint holds with each file's size and SHA-256, a save sequence number, and a
SHA-256 of the record itself, so an edited or damaged ``state.json`` is refused too.

Every save writes a new directory under a temporary name and renames it into place
only when complete; a directory that is already there is never renamed or replaced,
so a kill at any moment leaves ``latest`` pointing to an intact checkpoint (the old
one or the new one). ``latest`` is switched by an atomic file replace; only then are
the superseded and surplus checkpoints removed, and only directories this library
wrote (recognized by their ``state.json``), never anything a user put there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_safetensors
from safetensors.numpy import save as save_safetensors

from minitorch_accum.train.durable_files import (
    describe_os_error,
    fsync_directory,
    replace_file_atomically,
    write_all,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "FileCheckpointer",
    "LoadedCheckpoint",
    "SkippedCheckpoint",
]

#: the ``format`` of the state.json this version writes and reads
CHECKPOINT_FORMAT = 2
_LIBRARY = "minitorch_accum"
_LATEST = "latest"
_STATE = "state.json"
_SUFFIX = ".safetensors"
_RECORD_CHECKSUM = "record_sha256"
_RECORD_KEYS = ("directory", "tag", "sequence", "groups", "state")
# group names become file names, so they are kept to one plain, portable component
_GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
# temporary names: ".<name>.tmp-<host>-<pid>" (and ".del-" for a checkpoint being
# removed); earlier versions wrote ".<tag>.tmp-<pid>" and ".<tag>.old-<pid>"
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old|del)-(?:(?P<host>.+)-)?(?P<pid>[0-9]+)")
_HOST = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "localhost"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or corrupt, or cannot be written."""


class CheckpointFallbackWarning(UserWarning):
    """``latest`` could not be used and an older intact checkpoint was loaded instead."""


@dataclass(frozen=True)
class SkippedCheckpoint:
    """A checkpoint (or the ``latest`` pointer) passed over while loading, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class LoadedCheckpoint:
    """What :meth:`FileCheckpointer.load_checkpoint` read: the verified arrays and state,
    where they came from, and what was passed over to get there."""

    path: Path
    tag: str
    arrays: dict[str, dict[str, np.ndarray]]
    state: dict[str, Any]
    skipped: tuple[SkippedCheckpoint, ...] = ()

    @property
    def fell_back(self) -> bool:
        return bool(self.skipped)

    @property
    def message(self) -> str | None:
        """One line for the user when ``latest`` was not used (None when it was)."""
        if not self.skipped:
            return None
        reasons = "; ".join(skip.reason for skip in self.skipped)
        return f"{reasons}; using the newest intact checkpoint {self.path} instead"


# ------------------------------------------------------------------ helpers
def _record_checksum(body: dict[str, Any]) -> str:
    """SHA-256 of the record as canonical JSON: sorted keys, no spaces, so the digest
    depends only on the values and survives re-indenting."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _is_plain_name(name: str) -> bool:
    """One path component that stays inside its directory (no separators, no '..', not absolute)."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def _check_state(value: Any, where: str = "state") -> None:
    """Refuse what JSON would not give back unchanged (tuples, numpy scalars, non-str keys),
    so the state a resumed run reads is exactly the state that was saved."""
    if value is None or type(value) in (bool, int, float, str):
        return
    if type(value) is list:
        for index, item in enumerate(value):
            _check_state(item, f"{where}[{index}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"checkpoint {where} has the key {key!r} of type {type(key).__name__}; "
                                "JSON keys are strings, so it would come back changed: use str keys")
            _check_state(item, f"{where}[{key!r}]")
        return
    kind = type(value).__module__ + "." + type(value).__qualname__ if type(value).__module__ != "builtins" \
        else type(value).__name__
    raise TypeError(f"checkpoint {where} is a {kind}, which JSON would not give back unchanged: "
                    "use None, bool, int, float, str, list or dict")


def _read_regular_file(path: Path, checkpoint: Path) -> bytes:
    """The bytes of ``path``, refusing a symlink, FIFO or directory (a FIFO would block the read)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {checkpoint} is incomplete: {path.name} is missing") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {checkpoint}: cannot read {path.name}: {describe_os_error(exc)}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"checkpoint {checkpoint} is corrupt: {path.name} is {_kind(info.st_mode)}, "
                              "not a regular file")
    try:
        # O_NOFOLLOW and the fstat below close the gap between the lstat and the open
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CheckpointError(f"checkpoint {checkpoint} is corrupt: {path.name} is not a regular file")
            with os.fdopen(os.dup(fd), "rb") as handle:
                return handle.read()
        finally:
            os.close(fd)
    except OSError as exc:
        raise CheckpointError(f"checkpoint {checkpoint}: cannot read {path.name}: {describe_os_error(exc)}") from exc


def _parse_record(data: bytes, checkpoint: Path) -> dict[str, Any]:
    """The verified record of ``state.json``: right format, own checksum, every key present."""
    corrupt = f"checkpoint {checkpoint} is corrupt: {_STATE}"
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{corrupt} is not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise CheckpointError(f"{corrupt} does not hold a JSON object")
    if "format" not in record:
        raise CheckpointError(f"{corrupt} lacks 'format'")
    fmt = record["format"]
    if fmt == 1 and "library" not in record:
        raise CheckpointError(f"checkpoint {checkpoint} has format 1 (an older minitorch_accum, whose state.json "
                              f"had no checksum); this version reads format {CHECKPOINT_FORMAT}: start a new run")
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {checkpoint} has format {fmt!r}; this version reads format "
                              f"{CHECKPOINT_FORMAT}")
    if record.get("library") != _LIBRARY:
        raise CheckpointError(f"checkpoint {checkpoint}: {_STATE} was not written by {_LIBRARY} "
                              f"(library {record.get('library')!r})")
    if _RECORD_CHECKSUM not in record:
        raise CheckpointError(f"{corrupt} lacks {_RECORD_CHECKSUM!r}")
    body = {key: value for key, value in record.items() if key != _RECORD_CHECKSUM}
    if _record_checksum(body) != record[_RECORD_CHECKSUM]:
        raise CheckpointError(f"{corrupt} does not match its checksum (edited or damaged)")
    for key in _RECORD_KEYS:
        if key not in record:
            raise CheckpointError(f"{corrupt} lacks {key!r}")
    types = {"directory": str, "tag": str, "sequence": int, "groups": dict, "state": dict}
    for key, kind in types.items():
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            raise CheckpointError(f"{corrupt}: {key!r} is not a {kind.__name__}")
    for group, entry in record["groups"].items():
        if not _GROUP_NAME.fullmatch(group):
            raise CheckpointError(f"{corrupt} names the group {group!r}, which is not a plain name")
        if not isinstance(entry, dict) or not all(key in entry for key in ("file", "sha256", "bytes")):
            raise CheckpointError(f"{corrupt}: group {group!r} lacks 'file', 'sha256' or 'bytes'")
        file = entry["file"]
        if not isinstance(file, str) or not _is_plain_name(file) or os.path.isabs(file):
            raise CheckpointError(f"{corrupt}: group {group!r} names the file {file!r}, which leaves the "
                                  "checkpoint directory")
        if file != group + _SUFFIX:
            raise CheckpointError(f"{corrupt}: group {group!r} names the file {file!r}, expected "
                                  f"{group + _SUFFIX!r}")
    return record


def _read_record(checkpoint: Path) -> dict[str, Any]:
    state_path = checkpoint / _STATE
    if not os.path.lexists(state_path):
        raise CheckpointError(f"checkpoint {checkpoint} is missing or incomplete: it has no {_STATE}")
    return _parse_record(_read_regular_file(state_path, checkpoint), checkpoint)


def _write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``data``, fsynced: a rename that makes it
    visible must not be able to expose a file whose bytes are still in flight."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _process_alive(pid: int) -> bool:
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


def _looks_like_checkpoint_files(path: Path) -> bool:
    """A temporary directory holds only what a save writes; anything else is left alone."""
    try:
        entries = _list_directory(path)
    except OSError:
        return False
    return all(entry.is_file(follow_symlinks=False) and (entry.name == _STATE or entry.name.endswith(_SUFFIX))
               for entry in entries)


def _list_directory(path: Path) -> list[os.DirEntry]:
    with os.scandir(path) as entries:
        return list(entries)


def _is_legacy_checkpoint(path: Path) -> bool:
    """A format-1 checkpoint directory as earlier versions wrote it (for clear())."""
    try:
        record = json.loads((path / _STATE).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return (isinstance(record, dict) and record.get("format") == 1 and record.get("tag") == path.name
            and isinstance(record.get("files"), dict) and _looks_like_checkpoint_files(path))


# ------------------------------------------------------------------ checkpointer
class FileCheckpointer:
    """Saves and loads checkpoints under ``directory``, keeping the newest ``keep``.

    ``save(tag, arrays, state) -> Path``, ``load(path=None) -> (arrays, state)`` and
    ``latest()`` are the plain interface; ``load_checkpoint()`` also falls back to the
    newest intact checkpoint when ``latest`` is unusable and says what it skipped."""

    def __init__(self, directory: str | os.PathLike, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"FileCheckpointer: keep must be at least 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep

    # ---------------------------------------------------------------- save
    def save(self, tag: str, arrays: dict[str, dict[str, np.ndarray]], state: dict[str, Any]) -> Path:
        """Write one safetensors file per group of ``arrays`` plus ``state.json``, point
        ``latest`` at it and prune; return the checkpoint's path.

        ``tag`` names the checkpoint; saving a tag again supersedes the earlier one (under a
        fresh directory name, so the earlier one stays intact until ``latest`` has moved).
        ``state`` must be JSON-exact (None, bool, int, float, str, list, dict with str keys):
        it comes back from :meth:`load` equal to what was given, covered by the checksum.

        Raises ValueError for a tag or group that is not a plain name, TypeError for a state
        JSON would change, and CheckpointError (one line naming the path and the cause, e.g.
        "No space left on device (ENOSPC)") when the checkpoint cannot be written; then no
        partial directory is left and ``latest`` still points to the last good checkpoint."""
        # 120 characters leave room for the temporary name's prefix and suffix within NAME_MAX (255)
        if not _is_plain_name(tag) or tag.startswith(".") or tag == _LATEST or len(tag) > 120:
            raise ValueError(f"checkpoint tag {tag!r} must be a plain file name of at most 120 characters "
                             f"(no '/', not starting with '.', not {_LATEST!r})")
        payloads: dict[str, bytes] = {}
        for group, tensors in arrays.items():
            if not _GROUP_NAME.fullmatch(group):
                raise ValueError(f"checkpoint group {group!r} must be a plain name of letters, digits, '_', '.' "
                                 "or '-'")
            payloads[group] = save_safetensors({key: np.ascontiguousarray(value) for key, value in tensors.items()})
        if type(state) is not dict:
            raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
        _check_state(state)
        self._make_directory()
        self.remove_leftovers()
        existing = self._scan()
        sequence = 1 + max((record["sequence"] for _, record in existing), default=0)
        name = self._free_name(tag)
        final = self.directory / name
        tmp = self.directory / f".{name}.tmp-{_HOST}-{os.getpid()}"
        try:
            self._write_checkpoint(tmp, name, tag, sequence, payloads, state)
            os.rename(tmp, final)
        except OSError as exc:
            self._remove_quietly(tmp)
            raise CheckpointError(f"cannot save checkpoint {final}: {describe_os_error(exc)}; "
                                  f"{self._untouched()}") from exc
        fsync_directory(self.directory)
        try:
            self._point_latest(name)
        except OSError as exc:
            # latest still names the previous checkpoint; remove the new one so that the
            # directory is as it was before this save
            self._discard(final)
            raise CheckpointError(f"cannot save checkpoint {final}: cannot update {self.directory / _LATEST}: "
                                  f"{describe_os_error(exc)}; {self._untouched()}") from exc
        for path, record in existing:
            if record["tag"] == tag:
                self._discard(path)
        self._prune()
        return final

    def _make_directory(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            blocker, kind = self.directory, "not a directory"
            for candidate in (self.directory, *self.directory.parents):
                if os.path.lexists(candidate) and not candidate.is_dir():
                    blocker, kind = candidate, _kind(os.lstat(candidate).st_mode)
                    break
            raise CheckpointError(f"cannot save checkpoints in {self.directory}: {blocker} is {kind}, "
                                  "not a directory") from None
        except OSError as exc:
            raise CheckpointError(f"cannot create the checkpoint directory {self.directory}: "
                                  f"{describe_os_error(exc)}") from exc

    def _write_checkpoint(self, tmp: Path, name: str, tag: str, sequence: int, payloads: dict[str, bytes],
                          state: dict[str, Any]) -> None:
        os.mkdir(tmp)
        groups = {}
        for group, data in payloads.items():
            file = group + _SUFFIX
            _write_new_file(tmp / file, data)
            groups[group] = {"file": file, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        body = {"format": CHECKPOINT_FORMAT, "library": _LIBRARY, "directory": name, "tag": tag,
                "sequence": sequence, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "groups": groups, "state": state}
        record = {**body, _RECORD_CHECKSUM: _record_checksum(body)}
        _write_new_file(tmp / _STATE, json.dumps(record, indent=1, ensure_ascii=False).encode("utf-8"))
        fsync_directory(tmp)

    def _free_name(self, tag: str) -> str:
        """``tag`` itself, or ``tag.2``, ``tag.3``... when that name is taken (by the checkpoint
        this save supersedes, or by anything else, which is never replaced)."""
        name, number = tag, 1
        while os.path.lexists(self.directory / name):
            number += 1
            name = f"{tag}.{number}"
        return name

    def _point_latest(self, name: str) -> None:
        replace_file_atomically(self.directory / _LATEST, (name + "\n").encode("utf-8"),
                                self.directory / f".{_LATEST}.tmp-{_HOST}-{os.getpid()}")

    def _untouched(self) -> str:
        try:
            previous = self.latest()
        except CheckpointError:
            previous = None
        if previous is None:
            return "nothing was written"
        return f"{self.directory / _LATEST} still points to {previous.name}"

    @staticmethod
    def _remove_quietly(path: Path) -> None:
        if os.path.lexists(path):
            shutil.rmtree(path, ignore_errors=True)

    def _discard(self, path: Path) -> None:
        """Remove a checkpoint this library wrote: renamed out of the way first, so that a
        kill halfway through leaves a temporary name (cleaned up later), not a directory
        that looks like a checkpoint but lacks some of its files."""
        doomed = self.directory / f".{path.name}.del-{_HOST}-{os.getpid()}"
        try:
            os.rename(path, doomed)
        except OSError:
            return
        shutil.rmtree(doomed, ignore_errors=True)

    def _prune(self) -> None:
        """Keep the newest ``keep`` intact-looking checkpoints; a damaged one is neither
        counted (it would crowd out a good one) nor removed (a user may want to look at it)."""
        intact = [(path, record) for path, record in self._scan() if self._looks_intact(path, record)]
        intact.sort(key=lambda item: item[1]["sequence"], reverse=True)
        for path, _ in intact[self.keep:]:
            self._discard(path)

    @staticmethod
    def _looks_intact(path: Path, record: dict[str, Any]) -> bool:
        """Cheap check (no hashing of the arrays): the record verifies and every file is a
        regular file of the recorded size."""
        try:
            _parse_record((path / _STATE).read_bytes(), path)
            for entry in record["groups"].values():
                info = os.lstat(path / entry["file"])
                if not stat.S_ISREG(info.st_mode) or info.st_size != entry["bytes"]:
                    return False
        except (OSError, CheckpointError, KeyError, TypeError):
            return False
        return True

    # ---------------------------------------------------------------- listing
    def _scan(self) -> list[tuple[Path, dict[str, Any]]]:
        """(path, record) of every checkpoint directory this library wrote here, in no order.

        Recognized by a real (not symlinked) directory whose state.json is ours, of this
        format, and names this very directory; a user's directory, or a copy of a checkpoint
        under another name, does not qualify and is never pruned."""
        try:
            entries = _list_directory(self.directory)
        except OSError:
            return []
        found = []
        for entry in entries:
            if entry.name.startswith(".") or entry.name == _LATEST or not entry.is_dir(follow_symlinks=False):
                continue
            path = Path(entry.path)
            try:
                info = os.lstat(path / _STATE)
                if not stat.S_ISREG(info.st_mode):
                    continue
                record = json.loads((path / _STATE).read_bytes().decode("utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if (isinstance(record, dict) and record.get("library") == _LIBRARY
                    and record.get("format") == CHECKPOINT_FORMAT and record.get("directory") == entry.name
                    and type(record.get("sequence")) is int and isinstance(record.get("tag"), str)
                    and isinstance(record.get("groups"), dict)):
                found.append((path, record))
        return found

    def checkpoints(self) -> list[Path]:
        """The checkpoint directories this library wrote here, newest first (unverified)."""
        found = sorted(self._scan(), key=lambda item: item[1]["sequence"], reverse=True)
        return [path for path, _ in found]

    def remove_leftovers(self) -> list[Path]:
        """Remove what interrupted saves of processes that are gone left behind; return those paths.

        Temporary directories (``.<name>.tmp-<host>-<pid>``, ``.<name>.del-...``, and the
        ``.<tag>.tmp-<pid>`` of earlier versions) are removed when their writer is gone (same
        host, PID not running) and they hold only checkpoint files. An earlier version's
        ``.<tag>.old-<pid>`` may be the only copy of a checkpoint (a kill between its two
        renames): it is renamed back to ``<tag>`` when that is missing, removed otherwise."""
        try:
            entries = _list_directory(self.directory)
        except OSError:
            return []
        touched = []
        for entry in entries:
            match = _LEFTOVER.fullmatch(entry.name)
            if match is None:
                continue
            host = match["host"]
            if (host is not None and host != _HOST) or _process_alive(int(match["pid"])):
                continue
            if match["kind"] == "old" and match["name"] == _LATEST:
                continue  # never written as a directory by any version
            path = Path(entry.path)
            try:
                if entry.is_file(follow_symlinks=False) and match["name"] == _LATEST and match["kind"] == "tmp":
                    os.unlink(path)
                elif not entry.is_dir(follow_symlinks=False) or not _looks_like_checkpoint_files(path):
                    continue
                elif match["kind"] == "old" and not os.path.lexists(self.directory / match["name"]):
                    os.rename(path, self.directory / match["name"])
                else:
                    shutil.rmtree(path)
            except OSError:
                continue  # best effort: a leftover that cannot be removed now is tried again next save
            touched.append(path)
        return touched

    def library_entries(self) -> list[Path]:
        """What this library wrote here, by name: ``latest`` and the checkpoint directories of
        this format and of earlier ones (not leftovers of interrupted saves)."""
        try:
            entries = _list_directory(self.directory)
        except OSError:
            return []
        ours = {path for path, _ in self._scan()}
        found = []
        for entry in sorted(entries, key=lambda e: e.name):
            path = Path(entry.path)
            if entry.name == _LATEST:
                if entry.is_file(follow_symlinks=False):
                    found.append(path)
            elif path in ours or (entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                                  and _is_legacy_checkpoint(path)):
                found.append(path)
        return found

    def clear(self) -> list[Path]:
        """Remove everything this library wrote in the directory (a run started over with
        ``--overwrite``): :meth:`library_entries` and leftovers of dead processes; anything
        else stays. The directory itself goes when that leaves it empty. Returns the removed
        paths; CheckpointError when one cannot be removed."""
        if not os.path.lexists(self.directory):
            return []
        if not self.directory.is_dir():
            raise CheckpointError(f"checkpoint directory {self.directory} is a regular file, not a directory")
        removed = self.remove_leftovers()
        try:
            for path in self.library_entries():  # latest sorts among them; its target goes anyway
                if path.name == _LATEST:
                    os.unlink(path)
                else:
                    shutil.rmtree(path)
                removed.append(path)
        except OSError as exc:
            raise CheckpointError(f"cannot remove the checkpoints in {self.directory}: "
                                  f"{describe_os_error(exc)}") from exc
        # not empty (a user's files stay) or a symlink to a directory elsewhere: it stays
        with contextlib.suppress(OSError):
            self.directory.rmdir()
        return removed

    # ---------------------------------------------------------------- load
    def latest(self) -> Path | None:
        """The checkpoint ``latest`` points to (which may be missing), or None when there is no
        ``latest``. CheckpointError when the pointer is not a regular file or names a path
        outside this directory."""
        pointer = self.directory / _LATEST
        try:
            info = os.lstat(pointer)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read {pointer}: {describe_os_error(exc)}") from exc
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointError(f"checkpoint pointer {pointer} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > 4096:
            raise CheckpointError(f"checkpoint pointer {pointer} is corrupt: {info.st_size} bytes long")
        try:
            name = pointer.read_bytes().decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"checkpoint pointer {pointer} cannot be read ({exc})") from exc
        if not name:
            raise CheckpointError(f"checkpoint pointer {pointer} is empty")
        if not _is_plain_name(name) or os.path.isabs(name):
            raise CheckpointError(f"checkpoint pointer {pointer} names {name!r}, which leaves {self.directory}")
        if name.startswith("."):
            raise CheckpointError(f"checkpoint pointer {pointer} names {name!r}, a temporary directory")
        return self.directory / name

    def load(self, path: str | os.PathLike | None = None, *, require: Iterable[str] = (),
             fallback: bool = False) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any]]:
        """(arrays by group, state) of ``path`` (default: the latest), every file verified.

        Strict by default: CheckpointError when ``latest`` is unusable. With ``fallback=True``
        the newest intact checkpoint is used instead and a CheckpointFallbackWarning says so;
        :meth:`load_checkpoint` returns that message instead of warning."""
        loaded = self.load_checkpoint(path, require=require, fallback=fallback)
        if loaded.message is not None:
            warnings.warn(loaded.message, CheckpointFallbackWarning, stacklevel=2)
        return loaded.arrays, loaded.state

    def load_checkpoint(self, path: str | os.PathLike | None = None, *, require: Iterable[str] = (),
                        fallback: bool = True) -> LoadedCheckpoint:
        """The checkpoint at ``path``, or the one ``latest`` points to, verified: state.json's
        own checksum, its format and keys, every group it lists present as a regular file
        matching its size and SHA-256, and every group in ``require`` present.

        When ``latest`` is missing, dangling, malformed or names a damaged checkpoint and
        ``fallback`` is true, the checkpoints this library wrote here are tried newest first;
        the result's ``skipped`` and ``message`` say what was passed over and why. Raises
        CheckpointError ("no checkpoint found in DIR" when there is none at all) otherwise."""
        required = tuple(require)
        if path is not None:
            return self._load_verified(Path(path), required, inside=False)
        skipped: list[SkippedCheckpoint] = []
        target: Path | None = None
        try:
            target = self.latest()
        except CheckpointError as exc:
            if not fallback:
                raise
            skipped.append(SkippedCheckpoint(self.directory / _LATEST, str(exc)))
        if target is not None:
            try:
                return self._load_verified(target, required, inside=True)
            except CheckpointError as exc:
                if not fallback:
                    raise
                skipped.append(SkippedCheckpoint(target, str(exc)))
        elif not fallback:
            raise CheckpointError(f"no checkpoint found in {self.directory} (nothing to resume from)")
        candidates = [candidate for candidate in self.checkpoints() if candidate != target]
        if target is None and not skipped and candidates:
            skipped.append(SkippedCheckpoint(self.directory / _LATEST,
                                             f"checkpoint pointer {self.directory / _LATEST} is missing"))
        for candidate in candidates:
            try:
                loaded = self._load_verified(candidate, required, inside=True)
            except CheckpointError as exc:
                skipped.append(SkippedCheckpoint(candidate, str(exc)))
                continue
            return LoadedCheckpoint(loaded.path, loaded.tag, loaded.arrays, loaded.state, tuple(skipped))
        if not skipped:
            raise CheckpointError(f"no checkpoint found in {self.directory} (nothing to resume from)")
        raise CheckpointError(f"no intact checkpoint in {self.directory}: "
                              + "; ".join(skip.reason for skip in skipped))

    def _load_verified(self, target: Path, required: tuple[str, ...], inside: bool) -> LoadedCheckpoint:
        """Read and verify one checkpoint. ``inside``: reached through this directory (the
        pointer or a scan), so it must be a real directory here, not a symlink out of it."""
        try:
            info = os.lstat(target) if inside else os.stat(target)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {target} does not exist"
                                  + (f" ({self.directory / _LATEST} points to it)" if inside else "")) from None
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {target}: {describe_os_error(exc)}") from exc
        if not stat.S_ISDIR(info.st_mode):
            raise CheckpointError(f"checkpoint {target} is {_kind(info.st_mode)}, not a directory")
        record = _read_record(target)
        groups: dict[str, dict[str, Any]] = record["groups"]
        missing = [group for group in required if group not in groups]
        if missing:
            held = ", ".join(repr(group) for group in groups) or "none"
            raise CheckpointError(f"checkpoint {target} lacks the group(s) {', '.join(map(repr, missing))} "
                                  f"(it holds {held})")
        arrays = {}
        for group, entry in groups.items():
            data = _read_regular_file(target / entry["file"], target)
            if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
                raise CheckpointError(f"checkpoint {target} is corrupt: {entry['file']} does not match its checksum")
            try:
                arrays[group] = load_safetensors(data)
            except SafetensorError as exc:
                raise CheckpointError(f"checkpoint {target} is corrupt: {entry['file']} cannot be read "
                                      f"({exc})") from None
        return LoadedCheckpoint(target, record["tag"], arrays, record["state"])

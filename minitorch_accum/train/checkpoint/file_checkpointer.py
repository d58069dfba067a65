"""FileCheckpointer: checkpoints in a directory, saved atomically, loaded verified, the newest N kept.

It composes the pieces of this package: the record (record.py) written by writing.py,
the catalog of what the directory holds (catalog.py), the cleanup of interrupted saves
(leftovers.py), which checkpoints to keep (retention.py) and the verified read
(verified_reading.py). The order of a save's steps is what makes it safe, so it lives here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.durable_files import (
    describe_file_type,
    describe_os_error,
    fsync_directory,
    replace_file_atomically,
)
from minitorch_accum.train.checkpoint import catalog, leftovers
from minitorch_accum.train.checkpoint.errors import CheckpointError, CheckpointFallbackWarning, DamagedCheckpointWarning
from minitorch_accum.train.checkpoint.loaded import LoadedCheckpoint, SkippedCheckpoint
from minitorch_accum.train.checkpoint.retention import surplus_checkpoints
from minitorch_accum.train.checkpoint.verified_reading import read_verified_checkpoint
from minitorch_accum.train.checkpoint.writing import encode_checkpoint, write_checkpoint_directory

__all__ = ["DAMAGED", "FileCheckpointer"]

#: a damaged checkpoint set aside is renamed ``<name>.damaged-<n>``
DAMAGED = ".damaged-"


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
        payloads = encode_checkpoint(tag, arrays, state)
        self._make_directory()
        self.remove_leftovers()
        existing = catalog.scan(self.directory)
        sequence = 1 + max((entry.record["sequence"] for entry in existing), default=0)
        superseded = self._superseded(existing, tag)
        name = self._free_name(tag)
        final = self.directory / name
        tmp = self.directory / leftovers.temporary_name(name, "tmp")
        try:
            write_checkpoint_directory(tmp, name, tag, sequence, payloads, state)
            os.rename(tmp, final)
        except BaseException as exc:
            # a full disk, or a stop at once (a second Ctrl-C) in the middle of the write: nothing half-written stays
            if os.path.lexists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(exc, OSError):
                raise
            raise CheckpointError(f"cannot save checkpoint {final}: {describe_os_error(exc)}; "
                                  f"{self._untouched()}") from exc
        fsync_directory(self.directory)
        pointer_tmp = self.directory / leftovers.temporary_name(catalog.LATEST, "tmp")
        try:
            replace_file_atomically(self.directory / catalog.LATEST, (name + "\n").encode("utf-8"), pointer_tmp)
        except OSError as exc:
            # latest still names the previous checkpoint; remove the new one so that the
            # directory is as it was before this save
            self._discard(final)
            raise CheckpointError(f"cannot save checkpoint {final}: cannot update {self.directory / catalog.LATEST}: "
                                  f"{describe_os_error(exc)}; {self._untouched()}") from exc
        except BaseException:  # a stop at once: latest names the old checkpoint or the new one, no temporary stays
            with contextlib.suppress(OSError):
                os.unlink(pointer_tmp)
            raise
        for entry in superseded:
            self._discard(entry.path)
        for path in surplus_checkpoints(catalog.scan(self.directory), self.keep):
            self._discard(path)
        return final

    def _make_directory(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            blocker, kind = self.directory, "not a directory"
            for candidate in (self.directory, *self.directory.parents):
                if os.path.lexists(candidate) and not candidate.is_dir():
                    blocker, kind = candidate, describe_file_type(os.lstat(candidate).st_mode)
                    break
            raise CheckpointError(f"cannot save checkpoints in {self.directory}: {blocker} is {kind}, "
                                  "not a directory") from None
        except OSError as exc:
            raise CheckpointError(f"cannot create the checkpoint directory {self.directory}: "
                                  f"{describe_os_error(exc)}") from exc

    def _free_name(self, tag: str) -> str:
        """``tag`` itself, or ``tag.2``, ``tag.3``... when that name is taken (by the checkpoint
        this save supersedes, or by anything else, which is never replaced)."""
        name, number = tag, 1
        while os.path.lexists(self.directory / name):
            number += 1
            name = f"{tag}.{number}"
        return name

    def _untouched(self) -> str:
        try:
            previous = self.latest()
        except CheckpointError:
            previous = None
        if previous is None:
            return "nothing was written"
        return f"{self.directory / catalog.LATEST} still points to {previous.name}"

    def _discard(self, path: Path) -> None:
        """Remove a checkpoint this library wrote: renamed out of the way first, so that a
        kill halfway through leaves a temporary name (cleaned up later), not a directory
        that looks like a checkpoint but lacks some of its files."""
        doomed = self.directory / leftovers.temporary_name(path.name, "del")
        try:
            os.rename(path, doomed)
        except OSError:
            return
        try:
            shutil.rmtree(doomed, ignore_errors=True)
        except BaseException:  # a stop at once (a second Ctrl-C) in the middle: finish, then stop
            shutil.rmtree(doomed, ignore_errors=True)
            raise

    def set_aside(self, path: Path) -> Path | None:
        """Rename the damaged checkpoint ``path`` to ``<name>.damaged-<n>`` (the first free n): it is
        then no checkpoint of this directory (not loaded, not counted by retention, not cleared
        by ``clear()``), and never removed, so the user can look at it. Returns the new path, or
        None when ``path`` is not a real directory here or cannot be renamed (it stays as it is)."""
        if path.parent != self.directory or not path.is_dir() or path.is_symlink():
            return None
        number = 1
        while os.path.lexists(self.directory / f"{path.name}{DAMAGED}{number}"):
            number += 1
        kept = self.directory / f"{path.name}{DAMAGED}{number}"
        try:
            os.rename(path, kept)
            fsync_directory(self.directory)
        except OSError:
            return None
        return kept

    def _superseded(self, entries: list[catalog.CatalogEntry], tag: str) -> list[catalog.CatalogEntry]:
        """The intact checkpoints of ``tag`` (verified in full: a damaged one may have its sizes
        right); a damaged one is set aside instead, never removed."""
        intact = []
        for entry in entries:
            if entry.record["tag"] != tag:
                continue
            try:
                read_verified_checkpoint(entry.path, (), directory=self.directory)
            except CheckpointError as exc:
                kept = self.set_aside(entry.path)
                where = f"kept as {kept}" if kept is not None else "left where it is"
                warnings.warn(f"{exc}; {where} (damaged checkpoints are never removed)", DamagedCheckpointWarning,
                              stacklevel=3)
                continue
            intact.append(entry)
        return intact

    # ---------------------------------------------------------------- listing and clearing
    def checkpoints(self) -> list[Path]:
        """The checkpoint directories this library wrote here, newest first (unverified)."""
        return [entry.path for entry in catalog.newest_first(catalog.scan(self.directory))]

    def remove_leftovers(self) -> list[Path]:
        """Remove what interrupted saves of processes that are gone left behind; return those paths
        (see leftovers.remove_leftovers)."""
        return leftovers.remove_leftovers(self.directory)

    def library_entries(self) -> list[Path]:
        """What this library wrote here, by name: ``latest`` and the checkpoint directories of
        this format and of earlier ones (not leftovers of interrupted saves)."""
        ours = {entry.path for entry in catalog.scan(self.directory)}
        found = []
        for entry in sorted(catalog.list_entries(self.directory), key=lambda e: e.name):
            path = Path(entry.path)
            if entry.name == catalog.LATEST:
                if entry.is_file(follow_symlinks=False):
                    found.append(path)
            elif path in ours or (entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                                  and leftovers.is_legacy_checkpoint(path)):
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
                if path.name == catalog.LATEST:
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
        return catalog.read_latest_pointer(self.directory)

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
                        fallback: bool = True, set_aside_damaged: bool = False) -> LoadedCheckpoint:
        """The checkpoint at ``path``, or the one ``latest`` points to, verified: state.json's
        own checksum, its format and keys, every group it lists present as a regular file
        matching its size and SHA-256, and every group in ``require`` present.

        When ``latest`` is missing, dangling, malformed or names a damaged checkpoint and
        ``fallback`` is true, the checkpoints this library wrote here are tried newest first;
        the result's ``skipped`` and ``message`` say what was passed over and why. With
        ``set_aside_damaged`` (a resume, which will save over their names) each damaged
        checkpoint directory passed over is set aside (``set_aside``) and its entry says where.
        Raises CheckpointError ("no checkpoint found in DIR" when there is none at all) otherwise."""
        required = tuple(require)
        if path is not None:
            return read_verified_checkpoint(Path(path), required, directory=None)
        pointer = self.directory / catalog.LATEST
        skipped: list[SkippedCheckpoint] = []
        target: Path | None = None
        try:
            target = self.latest()
        except CheckpointError as exc:
            if not fallback:
                raise
            skipped.append(SkippedCheckpoint(pointer, str(exc)))
        if target is not None:
            try:
                return read_verified_checkpoint(target, required, directory=self.directory)
            except CheckpointError as exc:
                if not fallback:
                    raise
                skipped.append(self._skipped(target, exc, set_aside_damaged))
        elif not fallback:
            raise CheckpointError(f"no checkpoint found in {self.directory} (nothing to resume from)")
        candidates = [candidate for candidate in self.checkpoints() if candidate != target]
        if target is None and not skipped and candidates:
            skipped.append(SkippedCheckpoint(pointer, f"checkpoint pointer {pointer} is missing"))
        for candidate in candidates:
            try:
                loaded = read_verified_checkpoint(candidate, required, directory=self.directory)
            except CheckpointError as exc:
                skipped.append(self._skipped(candidate, exc, set_aside_damaged))
                continue
            return LoadedCheckpoint(loaded.path, loaded.tag, loaded.arrays, loaded.state, tuple(skipped))
        if not skipped:
            raise CheckpointError(f"no checkpoint found in {self.directory} (nothing to resume from)")
        raise CheckpointError(f"no intact checkpoint in {self.directory}: "
                              + "; ".join(skip.describe() for skip in skipped))

    def _skipped(self, path: Path, error: CheckpointError, set_aside: bool) -> SkippedCheckpoint:
        return SkippedCheckpoint(path, str(error), self.set_aside(path) if set_aside else None)

"""File checkpoints that can be trusted: atomic, verified, never overwriting the last good one.

A checkpoint is a directory ``DIR/checkpoints/<tag>/`` holding safetensors files
(parameters, optimizer state, the gradient arena so a checkpoint taken mid-window
resumes mid-window) and ``state.json`` (step, epoch, loader position, RNG state,
counters, and a SHA-256 of every file). It is written under a temporary name and
renamed into place only when complete; ``latest`` then points to it (also replaced
atomically). Loading verifies every checksum, so a truncated or altered file is a
clear error, and older checkpoints stay until a newer one is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

__all__ = ["CheckpointError", "FileCheckpointer"]

_LATEST = "latest"
_STATE = "state.json"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or corrupt."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileCheckpointer:
    """Saves and loads checkpoints under ``directory`` (keeping the newest ``keep``)."""

    def __init__(self, directory: str | os.PathLike, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"FileCheckpointer: keep must be at least 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep

    def save(self, tag: str, arrays: dict[str, dict[str, np.ndarray]], state: dict[str, Any]) -> Path:
        """Write one safetensors file per group of ``arrays`` plus ``state.json``; return the path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / tag
        tmp = self.directory / f".{tag}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        checksums = {}
        for group, tensors in arrays.items():
            path = tmp / f"{group}.safetensors"
            save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))
            checksums[path.name] = _sha256(path)
        record = {"format": 1, "tag": tag, "files": checksums, "state": state}
        state_path = tmp / _STATE
        with state_path.open("w", encoding="utf-8") as handle:
            json.dump(record, handle)
            handle.flush()
            os.fsync(handle.fileno())
        _fsync_dir(tmp)
        previous = None
        if final.exists():  # the same tag written again: keep the old copy until the new one is in place
            previous = self.directory / f".{tag}.old-{os.getpid()}"
            os.replace(final, previous)
        os.replace(tmp, final)
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        self._point_latest(tag)
        self._prune(keep_tag=tag)
        return final

    def _point_latest(self, tag: str) -> None:
        pointer = self.directory / _LATEST
        tmp = self.directory / f".{_LATEST}.tmp-{os.getpid()}"
        tmp.write_text(tag + "\n", encoding="utf-8")
        os.replace(tmp, pointer)
        _fsync_dir(self.directory)

    def _tags(self) -> list[Path]:
        if not self.directory.exists():
            return []
        found = [p for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith(".")]
        return sorted(found, key=lambda p: p.stat().st_mtime_ns)

    def _prune(self, keep_tag: str) -> None:
        tags = [p for p in self._tags() if p.name != keep_tag]
        for old in tags[: max(0, len(tags) - (self.keep - 1))]:
            shutil.rmtree(old, ignore_errors=True)

    def latest(self) -> Path | None:
        """The checkpoint ``latest`` points to, or None when there is none."""
        pointer = self.directory / _LATEST
        if not pointer.exists():
            return None
        return self.directory / pointer.read_text(encoding="utf-8").strip()

    def load(self, path: str | os.PathLike | None = None) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Any]]:
        """(arrays by group, state) of ``path`` (default: the latest), every file verified."""
        target = Path(path) if path is not None else self.latest()
        if target is None:
            raise CheckpointError(f"no checkpoint found in {self.directory} (nothing to resume from)")
        state_path = target / _STATE
        if not state_path.exists():
            raise CheckpointError(f"checkpoint {target} is missing or incomplete: it has no {_STATE}")
        try:
            record = json.loads(state_path.read_text(encoding="utf-8"))
            files = record["files"]
            state = record["state"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointError(f"checkpoint {target} is corrupt: {_STATE} cannot be read ({exc})") from None
        arrays = {}
        for name, expected in files.items():
            file = target / name
            if not file.exists():
                raise CheckpointError(f"checkpoint {target} is incomplete: {name} is missing")
            if _sha256(file) != expected:
                raise CheckpointError(f"checkpoint {target} is corrupt: {name} does not match its checksum")
            arrays[name.removesuffix(".safetensors")] = load_file(str(file))
        return arrays, state

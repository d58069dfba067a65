"""Reading one checkpoint back, every byte verified: the record, then each group's file against it."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_safetensors

from minitorch_accum.durable_files import NotRegularFileError, describe_file_type, describe_os_error, read_regular_file
from minitorch_accum.train.checkpoint.catalog import LATEST
from minitorch_accum.train.checkpoint.errors import CheckpointError
from minitorch_accum.train.checkpoint.loaded import LoadedCheckpoint
from minitorch_accum.train.checkpoint.record import STATE_FILE, parse_record

__all__ = ["read_verified_checkpoint"]

# safetensors writes ml_dtypes' bfloat16 as BF16 but its NumPy reader has no such dtype: the same
# bytes are read as uint16 (a header entry of the same length, so every offset stays) and viewed back
_BF16, _AS_U16 = b'"dtype":"BF16"', b'"dtype":"U16" '


def _load_group(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of one group's safetensors bytes, bfloat16 ones included."""
    if len(data) < 8:
        return load_safetensors(data)  # its own error for a file too short
    (length,) = struct.unpack("<Q", data[:8])
    header = data[8:8 + length]
    if _BF16 not in header:
        return load_safetensors(data)
    bf16 = {name for name, entry in json.loads(header).items()
            if isinstance(entry, dict) and entry.get("dtype") == "BF16"}
    arrays = load_safetensors(data[:8] + header.replace(_BF16, _AS_U16) + data[8 + length:])
    return {name: a.view(ml_dtypes.bfloat16) if name in bf16 else a for name, a in arrays.items()}


def _read_checkpoint_file(path: Path, checkpoint: Path) -> bytes:
    """The bytes of ``path``, a file of ``checkpoint``; CheckpointError naming the checkpoint
    when it is missing, not a regular file (a FIFO would block the read) or unreadable."""
    try:
        return read_regular_file(path)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {checkpoint} is incomplete: {path.name} is missing") from None
    except NotRegularFileError as exc:
        raise CheckpointError(f"checkpoint {checkpoint} is corrupt: {path.name} is {exc.file_type}, "
                              "not a regular file") from None
    except OSError as exc:
        raise CheckpointError(f"checkpoint {checkpoint}: cannot read {path.name}: {describe_os_error(exc)}") from exc


def read_verified_checkpoint(target: Path, required: tuple[str, ...], directory: Path | None) -> LoadedCheckpoint:
    """Read and verify the checkpoint ``target``: its record, every group in ``required``
    present, each group's file of the recorded size and SHA-256 and readable as safetensors.

    ``directory``: the checkpoint directory ``target`` was reached through (its pointer or
    a scan), so it must be a real directory there, not a symlink out of it; None for a path
    the caller named, which may be a symlink."""
    try:
        info = os.lstat(target) if directory is not None else os.stat(target)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {target} does not exist"
                              + (f" ({directory / LATEST} points to it)" if directory is not None else "")) from None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {target}: {describe_os_error(exc)}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise CheckpointError(f"checkpoint {target} is {describe_file_type(info.st_mode)}, not a directory")
    if not os.path.lexists(target / STATE_FILE):
        raise CheckpointError(f"checkpoint {target} is missing or incomplete: it has no {STATE_FILE}")
    record = parse_record(_read_checkpoint_file(target / STATE_FILE, target), target)
    groups: dict[str, dict[str, Any]] = record["groups"]
    missing = [group for group in required if group not in groups]
    if missing:
        held = ", ".join(repr(group) for group in groups) or "none"
        raise CheckpointError(f"checkpoint {target} lacks the group(s) {', '.join(map(repr, missing))} "
                              f"(it holds {held})")
    arrays = {}
    for group, entry in groups.items():
        data = _read_checkpoint_file(target / entry["file"], target)
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise CheckpointError(f"checkpoint {target} is corrupt: {entry['file']} does not match its checksum")
        try:
            arrays[group] = _load_group(data)
        except (SafetensorError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {target} is corrupt: {entry['file']} cannot be read "
                                  f"({exc})") from None
    return LoadedCheckpoint(target, record["tag"], arrays, record["state"])

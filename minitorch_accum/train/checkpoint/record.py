"""The record of a checkpoint, its ``state.json``: format, checksum, and what a valid one holds.

A record names the checkpoint's directory and tag, its save sequence number, each group
of arrays with its file, size and SHA-256, and the caller's state; ``record_sha256`` is
the SHA-256 of all of that as canonical JSON, so an edited or damaged record is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from typing import Any

from minitorch_accum.train.checkpoint.errors import CheckpointError

__all__ = [
    "ARRAYS_SUFFIX",
    "CHECKPOINT_FORMAT",
    "GROUP_NAME",
    "LIBRARY",
    "STATE_FILE",
    "check_json_exact",
    "encode_record",
    "group_entry",
    "is_plain_name",
    "parse_record",
    "record_checksum",
]

#: the ``format`` of the state.json this version writes and reads
CHECKPOINT_FORMAT = 2
#: the ``library`` a record must name: a state.json of anything else is not ours
LIBRARY = "minitorch_accum"
STATE_FILE = "state.json"
#: each group of arrays is the file ``<group>.safetensors``
ARRAYS_SUFFIX = ".safetensors"
#: group names become file names, so they are kept to one plain, portable component
GROUP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
_CHECKSUM_KEY = "record_sha256"
_TYPES = {"directory": str, "tag": str, "sequence": int, "groups": dict, "state": dict}


def record_checksum(body: dict[str, Any]) -> str:
    """SHA-256 of the record as canonical JSON: sorted keys, no spaces, so the digest
    depends only on the values and survives re-indenting."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def is_plain_name(name: str) -> bool:
    """One path component that stays inside its directory (no separators, no '..', not absolute)."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


def check_json_exact(value: Any, where: str = "state") -> None:
    """Refuse what JSON would not give back unchanged (tuples, numpy scalars, non-str keys),
    so the state a resumed run reads is exactly the state that was saved."""
    if value is None or type(value) in (bool, int, float, str):
        return
    if type(value) is list:
        for index, item in enumerate(value):
            check_json_exact(item, f"{where}[{index}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"checkpoint {where} has the key {key!r} of type {type(key).__name__}; "
                                "JSON keys are strings, so it would come back changed: use str keys")
            check_json_exact(item, f"{where}[{key!r}]")
        return
    kind = type(value).__module__ + "." + type(value).__qualname__ if type(value).__module__ != "builtins" \
        else type(value).__name__
    raise TypeError(f"checkpoint {where} is a {kind}, which JSON would not give back unchanged: "
                    "use None, bool, int, float, str, list or dict")


def group_entry(group: str, data: bytes) -> dict[str, Any]:
    """The record's entry for a group whose file holds ``data``."""
    return {"file": group + ARRAYS_SUFFIX, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def encode_record(directory: str, tag: str, sequence: int, groups: dict[str, dict[str, Any]],
                  state: dict[str, Any]) -> bytes:
    """The bytes of state.json for a checkpoint saved now, sealed with its checksum."""
    body = {"format": CHECKPOINT_FORMAT, "library": LIBRARY, "directory": directory, "tag": tag,
            "sequence": sequence, "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "groups": groups, "state": state}
    record = {**body, _CHECKSUM_KEY: record_checksum(body)}
    return json.dumps(record, indent=1, ensure_ascii=False).encode("utf-8")


def parse_record(data: bytes, checkpoint: os.PathLike) -> dict[str, Any]:
    """The verified record in ``data`` (the state.json of ``checkpoint``): right format,
    own checksum, every key present with its type, group files that stay in the directory."""
    corrupt = f"checkpoint {checkpoint} is corrupt: {STATE_FILE}"
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
    if record.get("library") != LIBRARY:
        raise CheckpointError(f"checkpoint {checkpoint}: {STATE_FILE} was not written by {LIBRARY} "
                              f"(library {record.get('library')!r})")
    if _CHECKSUM_KEY not in record:
        raise CheckpointError(f"{corrupt} lacks {_CHECKSUM_KEY!r}")
    body = {key: value for key, value in record.items() if key != _CHECKSUM_KEY}
    if record_checksum(body) != record[_CHECKSUM_KEY]:
        raise CheckpointError(f"{corrupt} does not match its checksum (edited or damaged)")
    for key in _TYPES:
        if key not in record:
            raise CheckpointError(f"{corrupt} lacks {key!r}")
    for key, kind in _TYPES.items():
        if not isinstance(record[key], kind) or isinstance(record[key], bool):
            raise CheckpointError(f"{corrupt}: {key!r} is not a {kind.__name__}")
    for group, entry in record["groups"].items():
        _check_group(group, entry, corrupt)
    return record


def _check_group(group: str, entry: Any, corrupt: str) -> None:
    if not GROUP_NAME.fullmatch(group):
        raise CheckpointError(f"{corrupt} names the group {group!r}, which is not a plain name")
    if not isinstance(entry, dict) or not all(key in entry for key in ("file", "sha256", "bytes")):
        raise CheckpointError(f"{corrupt}: group {group!r} lacks 'file', 'sha256' or 'bytes'")
    file = entry["file"]
    if not isinstance(file, str) or not is_plain_name(file) or os.path.isabs(file):
        raise CheckpointError(f"{corrupt}: group {group!r} names the file {file!r}, which leaves the "
                              "checkpoint directory")
    if file != group + ARRAYS_SUFFIX:
        raise CheckpointError(f"{corrupt}: group {group!r} names the file {file!r}, expected "
                              f"{group + ARRAYS_SUFFIX!r}")

"""Writing one checkpoint's files: what a save is given, checked and encoded, then written and fsynced.

Everything is checked and encoded before anything is written, so a tag, group or state
that would be refused leaves the directory untouched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save as save_safetensors

from minitorch_accum.durable_files import fsync_directory, write_new_file
from minitorch_accum.train.checkpoint.catalog import LATEST
from minitorch_accum.train.checkpoint.record import (
    GROUP_NAME,
    STATE_FILE,
    check_json_exact,
    encode_record,
    group_entry,
    is_plain_name,
)

__all__ = ["encode_checkpoint", "write_checkpoint_directory"]

# room for a temporary name's prefix and suffix within NAME_MAX (255)
_TAG_LIMIT = 120


def _check_tag(tag: str) -> None:
    """ValueError unless ``tag`` can name a checkpoint directory."""
    if not is_plain_name(tag) or tag.startswith(".") or tag == LATEST or len(tag) > _TAG_LIMIT:
        raise ValueError(f"checkpoint tag {tag!r} must be a plain file name of at most {_TAG_LIMIT} characters "
                         f"(no '/', not starting with '.', not {LATEST!r})")


def encode_checkpoint(tag: str, arrays: dict[str, dict[str, np.ndarray]], state: dict[str, Any]) -> dict[str, bytes]:
    """The safetensors bytes of each group of ``arrays``, once ``tag``, every group name and
    ``state`` have been checked: ValueError for a name that is not plain, TypeError for a
    state JSON would not give back unchanged."""
    _check_tag(tag)
    payloads: dict[str, bytes] = {}
    for group, tensors in arrays.items():
        if not GROUP_NAME.fullmatch(group):
            raise ValueError(f"checkpoint group {group!r} must be a plain name of letters, digits, '_', '.' "
                             "or '-'")
        payloads[group] = save_safetensors({key: np.ascontiguousarray(value) for key, value in tensors.items()})
    if type(state) is not dict:
        raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
    check_json_exact(state)
    return payloads


def write_checkpoint_directory(tmp: Path, name: str, tag: str, sequence: int, payloads: dict[str, bytes],
                               state: dict[str, Any]) -> None:
    """Create ``tmp`` holding each group's file and then state.json (the record naming the
    directory ``name``), all fsynced, so that renaming ``tmp`` to ``name`` publishes a
    complete checkpoint. OSError as it comes."""
    os.mkdir(tmp)
    groups = {}
    for group, data in payloads.items():
        entry = group_entry(group, data)
        write_new_file(tmp / entry["file"], data)
        groups[group] = entry
    write_new_file(tmp / STATE_FILE, encode_record(name, tag, sequence, groups, state))
    fsync_directory(tmp)

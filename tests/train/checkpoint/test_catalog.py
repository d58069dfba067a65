"""The catalog: only this library's checkpoint directories are listed, newest first, and the
cheap intact check tells a damaged one from a good one without hashing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.train.checkpoint import FileCheckpointer
from minitorch_accum.train.checkpoint.catalog import looks_intact, newest_first, scan
from minitorch_accum.train.checkpoint.record import record_checksum


def saved(directory: Path, *tags: str) -> FileCheckpointer:
    ckpt = FileCheckpointer(directory, keep=10)
    for step, tag in enumerate(tags, start=1):
        ckpt.save(tag, {"model": {"w": np.full(4, step, dtype=np.float32)}}, {"step": step})
    return ckpt


def plant(directory: Path, source: str, name: str, **changes: object) -> Path:
    """A copy of ``source`` under ``name`` whose record names ``name`` (so it passes the
    catalog's checks) except for ``changes``."""
    path = directory / name
    shutil.copytree(directory / source, path)
    record = json.loads((path / "state.json").read_text())
    record.update(directory=name, **changes)
    (path / "state.json").write_text(json.dumps(record))
    return path


def test_scan_lists_only_directories_this_library_wrote_here(tmp_path: Path) -> None:
    saved(tmp_path, "A", "B")
    plant(tmp_path, "A", "planted", sequence=9)  # everything right: it is listed, so the cases below are real
    plant(tmp_path, "A", "other_library", library="not_minitorch_accum")
    plant(tmp_path, "A", "newer_format", format=3)
    plant(tmp_path, "A", "text_sequence", sequence="7")
    plant(tmp_path, "A", "bool_sequence", sequence=True)
    plant(tmp_path, "A", "no_tag", tag=None)
    plant(tmp_path, "A", ".hidden")
    shutil.copytree(tmp_path / "A", tmp_path / "backup-of-A")  # the user's copy names A, not itself
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "state.json").write_text("{not json")
    # a checkpoint of its own name, reached through a symlink, or whose state.json is one
    saved(tmp_path / "elsewhere", "linked")
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere" / "linked")
    (tmp_path / "record_link").mkdir()
    record = json.loads((tmp_path / "A" / "state.json").read_text())
    (tmp_path / "elsewhere" / "record.json").write_text(json.dumps({**record, "directory": "record_link"}))
    (tmp_path / "record_link" / "state.json").symlink_to(tmp_path / "elsewhere" / "record.json")
    assert sorted(entry.path.name for entry in scan(tmp_path)) == ["A", "B", "planted"]


def test_scan_of_a_directory_that_cannot_be_listed_finds_nothing(tmp_path: Path) -> None:
    assert scan(tmp_path / "missing") == []
    (tmp_path / "file").write_text("not a directory")
    assert scan(tmp_path / "file") == []


def test_newest_first_orders_by_save_sequence_not_by_name(tmp_path: Path) -> None:
    saved(tmp_path, "C", "A", "B")
    plant(tmp_path, "A", "Z", sequence=0)
    assert [entry.path.name for entry in newest_first(scan(tmp_path))] == ["B", "A", "C", "Z"]


@pytest.mark.parametrize("damage", ["none", "truncated", "longer", "symlinked", "missing", "record_edited"])
def test_looks_intact_sees_size_kind_and_record_damage(tmp_path: Path, damage: str) -> None:
    saved(tmp_path, "A")
    path = tmp_path / "A"
    data = (path / "model.safetensors").read_bytes()
    if damage == "truncated":
        (path / "model.safetensors").write_bytes(data[:-1])
    elif damage == "longer":
        (path / "model.safetensors").write_bytes(data + b"\0")
    elif damage == "symlinked":  # the record resealed to the link's own size: only its kind gives it away
        (tmp_path / "copy").write_bytes(data)
        (path / "model.safetensors").unlink()
        (path / "model.safetensors").symlink_to(tmp_path / "copy")
        record = json.loads((path / "state.json").read_text())
        record["groups"]["model"]["bytes"] = os.lstat(path / "model.safetensors").st_size
        del record["record_sha256"]
        (path / "state.json").write_text(json.dumps({**record, "record_sha256": record_checksum(record)}))
    elif damage == "missing":
        (path / "model.safetensors").unlink()
    elif damage == "record_edited":
        (path / "state.json").write_text((path / "state.json").read_text().replace('"step": 1', '"step": 2'))
    [entry] = scan(tmp_path)
    assert looks_intact(entry) is (damage == "none")


"""Retention: the newest N intact checkpoints are kept; a damaged one is neither counted nor surplus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.train.checkpoint import FileCheckpointer
from minitorch_accum.train.checkpoint.catalog import scan
from minitorch_accum.train.checkpoint.retention import surplus_checkpoints

TAGS = ("s1", "s2", "s3", "s4", "s5")


def five_checkpoints(directory: Path) -> None:
    ckpt = FileCheckpointer(directory, keep=len(TAGS))
    for step, tag in enumerate(TAGS, start=1):
        ckpt.save(tag, {"model": {"w": np.full(3, step, dtype=np.float32)}}, {"step": step})


@pytest.mark.parametrize("keep, surplus", [(1, ["s4", "s3", "s2", "s1"]), (2, ["s3", "s2", "s1"]),
                                           (4, ["s1"]), (5, []), (9, [])])
def test_all_but_the_newest_keep_are_surplus(tmp_path: Path, keep: int, surplus: list[str]) -> None:
    five_checkpoints(tmp_path)
    assert [path.name for path in surplus_checkpoints(scan(tmp_path), keep)] == surplus


@pytest.mark.parametrize("damaged", ["s5", "s4", "s1"])
def test_a_damaged_checkpoint_is_neither_counted_nor_surplus(tmp_path: Path, damaged: str) -> None:
    five_checkpoints(tmp_path)
    (tmp_path / damaged / "model.safetensors").write_bytes(b"cut")
    intact = [tag for tag in reversed(TAGS) if tag != damaged]
    # the two kept are the two newest intact ones; the damaged one stays for a user to look at
    assert [path.name for path in surplus_checkpoints(scan(tmp_path), 2)] == intact[2:]


def test_a_save_keeps_exactly_keep_intact_checkpoints_and_the_damaged_ones(tmp_path: Path) -> None:
    five_checkpoints(tmp_path)
    (tmp_path / "s4" / "state.json").write_text("{")
    FileCheckpointer(tmp_path, keep=2).save("s6", {"model": {"w": np.zeros(3, dtype=np.float32)}}, {"step": 6})
    assert sorted(path.name for path in tmp_path.iterdir()) == ["latest", "s4", "s5", "s6"]

"""Burn-style Config: dataclass fields saved to and loaded from JSON."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from minitorch_accum.config import ConfigError, config


@config
class TrainingConfig:
    lr: float = 1e-3
    accum: int = 8
    betas: tuple[float, float] = (0.9, 0.999)
    name: str = "run"


def test_config_round_trip(tmp_path: Path) -> None:
    original = TrainingConfig(lr=3e-4, accum=4)
    original.save(tmp_path / "nested" / "run.json")
    loaded = TrainingConfig.load(tmp_path / "nested" / "run.json")
    assert loaded == original and isinstance(loaded.betas, tuple)


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        TrainingConfig.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        TrainingConfig.load(bad)
    extra = tmp_path / "extra.json"
    extra.write_text('{"lr": 0.1, "momentum": 0.9}')
    with pytest.raises(ConfigError, match=r"unknown field\(s\) momentum"):
        TrainingConfig.load(extra)


def test_config_save_fsyncs_the_file_before_the_rename_and_the_directory_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(source: os.PathLike, target: os.PathLike) -> None:
        events.append(("replace", f"{source} -> {target}"))
        real_replace(source, target)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    TrainingConfig(lr=3e-4).save(tmp_path / "run.json")
    [(_, written), (_, renamed), (_, directory)] = events
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
    assert Path(written).parent == tmp_path and Path(written).name.startswith(".run.json.")
    assert renamed == f"{written} -> {tmp_path / 'run.json'}"
    assert directory == str(tmp_path)
    assert TrainingConfig.load(tmp_path / "run.json").lr == 3e-4


def test_a_failing_config_write_leaves_the_old_file_intact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    TrainingConfig(lr=3e-4).save(tmp_path / "run.json")

    def full_disk(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(OSError, match=r"No space left on device"):
        TrainingConfig(lr=1.0, accum=2).save(tmp_path / "run.json")
    assert [path.name for path in tmp_path.iterdir()] == ["run.json"]  # no temporary file left
    assert TrainingConfig.load(tmp_path / "run.json") == TrainingConfig(lr=3e-4)

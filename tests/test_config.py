"""Burn-style Config: dataclass fields saved to and loaded from JSON."""

from __future__ import annotations

import dataclasses
import errno
import os
import re
from pathlib import Path
from typing import Literal

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


@config
class Optimizer:
    name: str = "adamw"
    betas: tuple[float, float] = (0.9, 0.999)


@config
class RunConfig:
    lr: float = 1e-3
    accum: int = 8
    optimizer: Optimizer = dataclasses.field(default_factory=Optimizer)
    schedule: dict[str, int] | None = None
    tags: list[str] = dataclasses.field(default_factory=list)
    device: Literal["cpu", "cuda"] = "cpu"
    warmup: int | None = None


def _load(tmp_path: Path, content: str | bytes, cls: type = RunConfig):
    path = tmp_path / "run.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return cls.load(path)


@pytest.mark.parametrize("content, field, message", [
    ('{"lr": "fast"}', "RunConfig.lr", "must be a number, got str 'fast'"),
    ('{"lr": true}', "RunConfig.lr", "must be a number, got bool True"),
    ('{"accum": 2.5}', "RunConfig.accum", "must be an int, got float 2.5"),
    ('{"optimizer": {"betas": "abc"}}', "RunConfig.optimizer.betas", r"must be a list \(a tuple\), got str 'abc'"),
    ('{"optimizer": {"betas": [0.9]}}', "RunConfig.optimizer.betas", "must hold 2 values, got 1"),
    ('{"optimizer": {"betas": [0.9, "x"]}}', r"RunConfig.optimizer.betas\[1\]", "must be a number, got str 'x'"),
    ('{"optimizer": {"momentum": 0.9}}', "RunConfig.optimizer:", r"unknown field\(s\) momentum"),
    ('{"optimizer": [1, 2]}', "RunConfig.optimizer", "must be a JSON object, got a list"),
    ('{"schedule": {"0": "many"}}', r"RunConfig.schedule\['0'\]", "must be an int, got str 'many'"),
    ('{"tags": "a,b"}', "RunConfig.tags", "must be a list, got str 'a,b'"),
    ('{"device": "tpu"}', "RunConfig.device", "must be one of 'cpu', 'cuda', got str 'tpu'"),
    ('{"warmup": "soon"}', "RunConfig.warmup", "must be an int, got str 'soon'"),
])
def test_config_files_are_checked_against_the_field_types(tmp_path: Path, content: str, field: str,
                                                          message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json: {field} {message}$"):
        _load(tmp_path, content)


def test_well_typed_config_files_load_with_their_types(tmp_path: Path) -> None:
    loaded = _load(tmp_path, '{"lr": 1, "optimizer": {"betas": [0.8, 0.9]}, "schedule": {"0": 4}, "warmup": null, '
                             '"tags": ["a"], "device": "cuda"}')
    assert loaded == RunConfig(lr=1.0, optimizer=Optimizer(betas=(0.8, 0.9)), schedule={"0": 4}, tags=["a"],
                               device="cuda")
    assert isinstance(loaded.lr, float) and isinstance(loaded.optimizer, Optimizer)
    assert RunConfig.load(_save(tmp_path, loaded)) == loaded


def _save(tmp_path: Path, value: RunConfig) -> Path:
    value.save(tmp_path / "again.json")
    return tmp_path / "again.json"


@pytest.mark.parametrize("content, message", [
    (b'{"lr": "\xff\xfe"}', r"is not UTF-8 text \(byte 8: b'\\xff'\)"),
    ("[" * 100_000 + "]" * 100_000, "nests its JSON deeper than 64 levels"),
    ('{"tags": ' + "[" * 70 + "]" * 70 + "}", "nests its JSON deeper than 64 levels"),
    ("[1, 2]", "must hold a JSON object, got a list"),
    ('"lr"', "must hold a JSON object, got str 'lr'"),
    ("", "is not valid JSON"),
])
def test_unreadable_config_files_raise_config_error_naming_the_file(tmp_path: Path, content: str | bytes,
                                                                    message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(tmp_path))}/run\.json {message}"):
        _load(tmp_path, content)


def test_a_directory_as_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot be read: Is a directory"):
        RunConfig.load(tmp_path)

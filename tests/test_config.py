"""Burn-style Config: dataclass fields saved to and loaded from JSON."""

from __future__ import annotations

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

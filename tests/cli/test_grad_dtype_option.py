"""``--grad-dtype bfloat16 --rounding stochastic``: the gradient arena of a command-line run, recorded
with the run, refused where it cannot apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitorch_accum.cli import main

SMALL = ["--dataset", "digits", "--micro-batch", "256", "--accum", "2", "--epochs", "1", "--progress", "none",
         "--checkpoint-every", "1"]


def _recorded(directory: Path) -> dict:
    """The settings record of the run's newest checkpoint."""
    state = json.loads(sorted((directory / "checkpoints").glob("step*/state.json"))[-1].read_text())
    return next(value for key, value in _walk(state) if key == "settings")


def _walk(tree: object):
    """Every (key, value) of a JSON tree, depth first."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield key, value
            yield from _walk(value)


def test_a_bfloat16_stochastic_arena_trains_and_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", *SMALL, "--grad-dtype", "bfloat16", "--rounding", "stochastic", "--out",
                 str(tmp_path / "sr")]) == 0
    settings = _recorded(tmp_path / "sr")
    assert settings["accum_dtype"] == "bfloat16" and settings["rounding"] == "stochastic"
    assert main(["train", *SMALL, "--out", str(tmp_path / "plain")]) == 0  # the default: the --dtype, to nearest
    settings = _recorded(tmp_path / "plain")
    assert settings["accum_dtype"] == "float32" and settings["rounding"] == "nearest"
    capsys.readouterr()
    # a resume keeps the arena's rounding: a typed change is refused; untyped, the record's is taken
    longer = [*SMALL, "--epochs", "2"]  # the run is complete after 1: only a longer one resumes
    assert main(["train", *longer, "--grad-dtype", "bfloat16", "--rounding", "nearest", "--out",
                 str(tmp_path / "sr"), "--resume"]) == 2
    assert "rounding 'stochastic' -> 'nearest'" in capsys.readouterr().err
    assert main(["train", *longer, "--out", str(tmp_path / "sr"), "--resume"]) == 0
    settings = _recorded(tmp_path / "sr")
    assert settings["accum_dtype"] == "bfloat16" and settings["rounding"] == "stochastic"


def test_stochastic_rounding_without_a_bfloat16_arena_is_refused_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["train", *SMALL, "--rounding", "stochastic", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "--rounding stochastic rounds a bfloat16 gradient arena; this run's is float32: add --grad-dtype " \
           "bfloat16" in err
    assert not (tmp_path / "run").exists()
    assert main(["compare", *SMALL[:6], "--rounding", "stochastic", "--dtype", "float64",
                 "--out", str(tmp_path / "cmp")]) == 2
    assert "this run's is float64" in capsys.readouterr().err

"""``maccum bench`` runs the benchmark programs of the checkout it finds, and says what to do
when the package is installed without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import minitorch_accum
from minitorch_accum.cli import main as maccum

PACKAGE = Path(minitorch_accum.__file__).resolve().parent


def test_bench_runs_the_checkout_program(capfd: pytest.CaptureFixture) -> None:
    assert maccum(["bench", "end-to-end", "--help"]) == 0
    out = capfd.readouterr().out
    assert out.startswith("usage: python benchmarks/end_to_end.py") and "--no-torch" in out


def test_bench_passes_the_program_exit_status(capfd: pytest.CaptureFixture) -> None:
    assert maccum(["bench", "kernels", "--repeats", "0"]) == 2
    assert "--repeats" in capfd.readouterr().err


def test_bench_without_a_checkout_says_what_to_do(tmp_path: Path) -> None:
    """The package copied alone (as pip installs it), run from a folder outside any checkout."""
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    shutil.copytree(PACKAGE, site / "minitorch_accum", ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    code = "import sys; from minitorch_accum.cli import main; sys.exit(main(['bench', 'kernels', '--quick']))"
    run = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2, run.stderr
    assert "benchmarks/kernels.py not found" in run.stderr and "checkout" in run.stderr
    assert not list(elsewhere.iterdir())

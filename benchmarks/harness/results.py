"""Where results go and how they are written: ``<name>-<date>-<machine>.json``, the same
payload as ``<name>-latest-<machine>.json``, and a plot beside it.

Only a run of the recorded configuration (the full settings, nothing overridden) writes
into the tracked ``benchmarks/results/``; quick runs and runs with overrides go to the
git-ignored ``benchmarks/results/quick/`` unless ``--out`` names a directory.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minitorch_accum.durable_files import check_output_path

__all__ = ["QUICK_RESULTS", "TRACKED_RESULTS", "ResultFiles", "machine_tag", "results_dir", "write_results"]

TRACKED_RESULTS = Path(__file__).resolve().parents[1] / "results"
QUICK_RESULTS = TRACKED_RESULTS / "quick"

Plot = Callable[[dict[str, Any], Path], None]


@dataclass(frozen=True)
class ResultFiles:
    """The files one run wrote: the dated JSON, its ``latest`` copy and the plot (None when none was drawn)."""

    json: Path
    latest: Path
    png: Path | None


def results_dir(override: str | os.PathLike | None, recorded: bool) -> Path:
    """``override`` when given; else the tracked results for a run of the recorded
    configuration, the quick-results folder for any other run. Created if needed, after the
    check that it can be (UnwritableOutputError naming ``--out`` otherwise): before the run
    measures anything, never after."""
    if override is not None:
        path = Path(override)
    else:
        path = TRACKED_RESULTS if recorded else QUICK_RESULTS
    check_output_path(path, "--out", directory=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def machine_tag(payload: dict[str, Any]) -> str:
    """``"gpu"`` for a run on a CUDA device, ``"cpu"`` otherwise (a CPU run on a machine that
    has a GPU is still a CPU run, and must not overwrite the GPU figures)."""
    device = str(payload.get("settings", {}).get("device", "cpu"))
    return "gpu" if device.startswith("cuda") else "cpu"


def write_results(name: str, payload: dict[str, Any], directory: Path, plot: Plot | None = None) -> ResultFiles:
    """Write ``<name>-<date>-<machine>.json``, ``<name>-latest-<machine>.json`` and, when ``plot``
    is given and matplotlib imports, ``<name>-latest-<machine>.png`` drawn by it."""
    machine = machine_tag(payload)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d")
    dated = directory / f"{name}-{stamp}-{machine}.json"
    latest = directory / f"{name}-latest-{machine}.json"
    text = json.dumps(payload, indent=2, default=float)
    dated.write_text(text)
    latest.write_text(text)
    png: Path | None = None
    if plot is not None and _matplotlib_imports():
        png = directory / f"{name}-latest-{machine}.png"
        plot(payload, png)
    return ResultFiles(dated, latest, png)


def _matplotlib_imports() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True

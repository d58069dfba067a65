"""What every benchmark shares: interleaved timing, machine facts, and result files.

Machines here are noisy, so variants are timed *interleaved* (one sample of each,
in a rotating order, repeated) and compared by medians measured in the same run;
absolute times are reported, never asserted.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["machine_info", "machine_tag", "median", "results_dir", "time_interleaved", "write_results"]


def machine_info() -> dict[str, Any]:
    """CPU, cores, library versions and (when present) the GPU, for the result files."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
    }
    import numpy

    info["numpy"] = numpy.__version__
    for name in ("scipy", "torch", "cupy"):
        try:
            module = __import__(name)
            info[name] = module.__version__
        except Exception:
            info[name] = None
    try:
        from minitorch_accum.backend import cuda_available

        if cuda_available():
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    except Exception:
        info["gpu"] = None
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def time_interleaved(variants: dict[str, Callable[[], Any]], repeats: int = 7, warmup: int = 2,
                     sync: Callable[[], None] | None = None,
                     timer: Callable[[Callable[[], Any]], float] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each variant: ``warmup`` untimed rounds, then ``repeats`` rounds
    that run every variant once, in an order rotated each round so none always goes first.
    ``timer`` replaces wall-clock timing (CUDA events on a GPU)."""
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}

    def wall(fn: Callable[[], Any]) -> float:
        if sync is not None:
            sync()
        start = time.perf_counter()
        fn()
        if sync is not None:
            sync()
        return time.perf_counter() - start

    measure = timer or wall
    for _ in range(warmup):
        for name in names:
            variants[name]()
    for round_index in range(repeats):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(measure(variants[name]))
    return samples


def median(values: list[float]) -> float:
    return statistics.median(values)


def results_dir(override: str | os.PathLike | None = None) -> Path:
    """``benchmarks/results`` of the repository (or ``override``), created if needed."""
    if override is not None:
        path = Path(override)
    else:
        here = Path(__file__).resolve()
        repo = next((p for p in here.parents if (p / "benchmarks").is_dir() and (p / "pyproject.toml").exists()),
                    None)
        path = (repo / "benchmarks" / "results") if repo is not None else Path.cwd() / "benchmark-results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def machine_tag(payload: dict[str, Any]) -> str:
    """``"gpu"`` for a run on a CUDA device, ``"cpu"`` otherwise (a CPU run on a machine that
    has a GPU is still a CPU run, and must not overwrite the GPU figures)."""
    device = str(payload.get("settings", {}).get("device", "cpu"))
    return "gpu" if device.startswith("cuda") else "cpu"


def write_results(name: str, payload: dict[str, Any], directory: str | os.PathLike | None = None) -> Path:
    """Write ``<name>-<date>-<machine>.json`` and ``<name>-latest-<machine>.json``; return the first."""
    target = results_dir(directory)
    machine = machine_tag(payload)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d")
    path = target / f"{name}-{stamp}-{machine}.json"
    text = json.dumps(payload, indent=2, default=float)
    path.write_text(text)
    (target / f"{name}-latest-{machine}.json").write_text(text)
    return path

"""The command line every benchmark shares: ``python benchmarks/<name>.py [--quick] [--device
cuda] [--out DIR] [--repeats N] [--no-plot] [its own options]``.

A benchmark describes itself once (``Benchmark``): its settings for a full and a quick run,
how its own options change them, how it measures, and how it prints and plots a payload.
This module does the rest the same way for each: refuses a CUDA run without a GPU, picks the
results folder (only the recorded configuration writes the tracked results), logs progress
with elapsed seconds on stderr, writes the files, prints the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from benchmarks.harness.results import Plot, ResultFiles, results_dir, write_results
from minitorch_accum.durable_files import UnwritableOutputError
from minitorch_accum.train.setting_kinds import positive_int

__all__ = ["Benchmark", "Log", "main", "override_repeats", "positive_int", "run_benchmark"]

Log = Callable[[str], None]


class DeviceSettings(Protocol):
    """What the harness reads of a benchmark's settings (frozen dataclasses, compared with ``==``)."""

    @property
    def device(self) -> str: ...


SettingsT = TypeVar("SettingsT", bound=DeviceSettings)


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """A benchmark without options of its own."""


@dataclass(frozen=True)
class Benchmark(Generic[SettingsT]):
    """One benchmark program: ``benchmarks/<name>.py`` writes ``<name>-<date>-<machine>.json``."""

    name: str
    description: str
    quick_help: str  # what --quick leaves out, for --help
    full_settings: Callable[[str], SettingsT]  # the recorded configuration, for a device
    quick_settings: Callable[[str], SettingsT]
    measure: Callable[[SettingsT, Log], dict[str, Any]]  # the JSON payload; writes nothing
    format_table: Callable[[dict[str, Any]], str]
    plot: Plot | None = None
    add_arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    # the benchmark's own options (and --repeats) applied to the mode's settings; ValueError on a bad value
    apply_arguments: Callable[[SettingsT, argparse.Namespace], SettingsT] = lambda settings, _args: settings


def override_repeats(*fields: str) -> Callable[[Any, argparse.Namespace], Any]:
    """An ``apply_arguments`` for a benchmark whose only option is --repeats: it sets ``fields``."""
    def apply(settings: Any, args: argparse.Namespace) -> Any:
        return settings if args.repeats is None else replace(settings, **dict.fromkeys(fields, args.repeats))

    return apply


def run_benchmark(benchmark: Benchmark[SettingsT], settings: SettingsT, out: Path, log: Log | None = None,
                  plot: bool = True) -> tuple[dict[str, Any], ResultFiles]:
    """Measure ``settings`` and write the result files into ``out``; return the payload and the files."""
    from minitorch_accum import cuda_available

    if settings.device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {settings.device!r}")
    if settings.device == "cuda" and not cuda_available():
        raise RuntimeError("device 'cuda' requested but no CUDA device is usable (CuPy missing or no GPU)")
    payload = benchmark.measure(settings, log or (lambda _message: None))
    return payload, write_results(benchmark.name, payload, out, benchmark.plot if plot else None)


def main(benchmark: Benchmark[Any], argv: list[str] | None = None) -> int:
    """Parse the command line, run the benchmark, print its table and where the files went."""
    prog = f"python benchmarks/{benchmark.name}.py"
    parser = argparse.ArgumentParser(prog=prog, description=benchmark.description)
    parser.add_argument("--quick", action="store_true", help=benchmark.quick_help)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", default=None, help="directory for the JSON and PNG (default: benchmarks/results "
                        "for a full run, benchmarks/results/quick for a quick run or one with overrides)")
    parser.add_argument("--repeats", type=positive_int, default=None, help="timed rounds (overrides the mode's)")
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    benchmark.add_arguments(parser)
    args = parser.parse_args(argv)

    from minitorch_accum import cuda_available

    if args.device == "cuda" and not cuda_available():
        print(f"{prog}: --device cuda, but no CUDA device is usable here (CuPy and a GPU are needed)",
              file=sys.stderr)
        return 2
    mode_settings = benchmark.quick_settings if args.quick else benchmark.full_settings
    try:
        settings = benchmark.apply_arguments(mode_settings(args.device), args)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    recorded = not args.quick and settings == benchmark.full_settings(args.device)
    try:
        out = results_dir(args.out, recorded)
    except UnwritableOutputError as exc:  # said before measuring, not after
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2

    start = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    if args.out is None and not recorded:
        log(f"not the recorded configuration (quick or overridden): results go to {out}, "
            "the tracked benchmarks/results stay as they are")
    payload, files = run_benchmark(benchmark, settings, out, log, plot=not args.no_plot)
    print(benchmark.format_table(payload))
    print(f"\nwrote {files.json}" + (f" and {files.png}" if files.png is not None else ""))
    return 0

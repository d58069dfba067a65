"""Benchmarks: kernel microbenchmarks and end-to-end runs (``maccum bench ...``).

Each benchmark is a program that prints a table of ratios measured side by side in
one run and writes JSON (and a PNG) to ``benchmarks/results/``; none asserts a time.
"""

from __future__ import annotations

import importlib

__all__ = ["BENCHMARKS", "run_benchmark"]

BENCHMARKS = {"kernels": "minitorch_accum.bench.kernels", "end-to-end": "minitorch_accum.bench.end_to_end"}


def run_benchmark(which: str, argv: list[str]) -> int:
    """Run ``maccum bench <which> [args]``."""
    if which not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {which!r}: expected one of {', '.join(BENCHMARKS)}")
    return int(importlib.import_module(BENCHMARKS[which]).main(argv) or 0)

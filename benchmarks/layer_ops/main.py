"""The op-level benchmark as a program: ``python benchmarks/layer_ops.py [--quick] [--threads N]
[--out DIR] [--repeats N]``."""

from __future__ import annotations

import argparse
from dataclasses import replace
from functools import partial

from benchmarks.harness import program
from benchmarks.layer_ops.measure import BENCHMARK, measure
from benchmarks.layer_ops.report import format_table
from benchmarks.layer_ops.settings import Settings, full_settings, quick_settings

__all__ = ["LAYER_OPS", "main"]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=program.positive_int, default=None,
                        help="threads of every pool: BLAS, PyTorch, the native kernels (default: 1)")


def _apply(settings: Settings, args: argparse.Namespace) -> Settings:
    if args.repeats is not None:
        settings = replace(settings, repeats=args.repeats, gemm_repeats=args.repeats)
    return settings if args.threads is None else replace(settings, threads=args.threads)


LAYER_OPS = program.Benchmark(
    name=BENCHMARK,
    description="The fused layer kernels and the weight-gradient GEMM against PyTorch's ops, threads pinned.",
    quick_help="128 items, two small GEMMs, few rounds",
    full_settings=full_settings, quick_settings=quick_settings,
    measure=measure, format_table=format_table, add_arguments=_add_arguments, apply_arguments=_apply,
)

# the program: main(argv) -> exit status
main = partial(program.main, LAYER_OPS)

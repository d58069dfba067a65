"""The end-to-end benchmark as a program: ``python benchmarks/end_to_end.py [--quick] [--device
cuda] [--out DIR] [--repeats N] [--ks 1,2,4] [--models ...] [--no-torch] [--threads N]
[--no-plot]`` (also ``maccum bench end-to-end ...`` from a checkout)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from functools import partial

from benchmarks.end_to_end.measure import BENCHMARK, measure
from benchmarks.end_to_end.report import format_table, plot
from benchmarks.end_to_end.settings import Settings, full_settings, quick_settings
from benchmarks.harness import program

__all__ = ["END_TO_END", "main"]


def _parse_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ks", type=_parse_ints, default=None, help="window lengths, e.g. 1,2,4,8,16")
    parser.add_argument("--models", default=None,
                        help="comma-separated subset of: digits_mlp, wide_mlp, char_transformer")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch eager comparison")
    parser.add_argument("--threads", type=program.positive_int, default=None,
                        help="limit NumPy's BLAS, OpenMP and torch to N threads (default: as configured); "
                             "1 keeps timings steady on a machine that other processes share")


def _apply_arguments(settings: Settings, args: argparse.Namespace) -> Settings:
    if args.models:
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        known = {m.name: m for m in settings.models}
        unknown = [m for m in wanted if m not in known]
        if unknown:
            raise ValueError(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(known)}")
        settings = replace(settings, models=tuple(known[m] for m in wanted))
    if args.repeats is not None:
        settings = replace(settings, models=tuple(replace(m, repeats=args.repeats) for m in settings.models))
    if args.ks is not None:
        settings = replace(settings, ks=args.ks)
    return replace(settings, compare_torch=not args.no_torch, plot=not args.no_plot, threads=args.threads)


END_TO_END = program.Benchmark(
    name=BENCHMARK,
    description="End-to-end accumulation: overhead per micro-batch, peak memory, items/s against PyTorch eager.",
    quick_help="k in {1, 8}, few repeats (under two minutes on 2 cores)",
    full_settings=full_settings, quick_settings=quick_settings,
    add_arguments=_add_arguments, apply_arguments=_apply_arguments,
    measure=measure, format_table=format_table, plot=plot,
)

# the program: main(argv) -> exit status
main = partial(program.main, END_TO_END)

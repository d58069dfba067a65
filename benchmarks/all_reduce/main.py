"""The all-reduce benchmark as a program: ``python benchmarks/all_reduce.py [--quick] [--out DIR]
[--repeats N] [--no-plot]`` (also ``maccum bench all-reduce ...`` from a checkout)."""

from __future__ import annotations

from functools import partial

from benchmarks.all_reduce.measure import BENCHMARK, measure
from benchmarks.all_reduce.report import format_table, plot
from benchmarks.all_reduce.settings import full_settings, quick_settings
from benchmarks.harness import program

__all__ = ["ALL_REDUCE", "main"]


ALL_REDUCE = program.Benchmark(
    name=BENCHMARK,
    description="The window's all-reduce of the gradient arena against the memory copy; step time R=1 vs R=2.",
    quick_help="two small arenas, a small MLP, few rounds",
    full_settings=full_settings, quick_settings=quick_settings, apply_arguments=program.override_repeats("repeats"),
    measure=measure, format_table=format_table, plot=plot,
)

main = partial(program.main, ALL_REDUCE)

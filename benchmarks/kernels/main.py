"""The kernel benchmark as a program: ``python benchmarks/kernels.py [--quick] [--device cuda]
[--out DIR] [--repeats N] [--no-plot]`` (also ``maccum bench kernels ...`` from a checkout)."""

from __future__ import annotations

from functools import partial

from benchmarks.harness import program
from benchmarks.kernels.measure import BENCHMARK, measure
from benchmarks.kernels.report import format_table, plot
from benchmarks.kernels.settings import full_settings, quick_settings

__all__ = ["KERNELS", "main"]


KERNELS = program.Benchmark(
    name=BENCHMARK,
    description="Fused accumulation kernels against NumPy, PyTorch and the measured memory bandwidth.",
    quick_help="a few sizes, fewer rounds, model shapes / 8",
    full_settings=full_settings, quick_settings=quick_settings,
    apply_arguments=program.override_repeats("repeats", "small_repeats", "model_repeats"),
    measure=measure, format_table=format_table, plot=plot,
)

# the program: main(argv) -> exit status
main = partial(program.main, KERNELS)

"""What every benchmark shares: the command line and result files (``program``, ``results``),
interleaved timing (``timing``), contention sampling (``contention``), machine facts
(``machine``), optional PyTorch (``torch_import``), the model shapes (``model_shapes``) and hosts
made as network namespaces on this machine (``netns_cluster``, as root; the multi-host tests use
them too)."""

from benchmarks.harness.contention import ContentionTimer, cpu_ticks, other_cpu_share, rounds_for_medians
from benchmarks.harness.machine import blas_threads, loadavg, machine_info, native_simd
from benchmarks.harness.model_shapes import gpt2_small_shapes
from benchmarks.harness.program import Benchmark, Log, main, positive_int, run_benchmark
from benchmarks.harness.results import ResultFiles, machine_tag, results_dir, write_results
from benchmarks.harness.timing import median, time_interleaved
from benchmarks.harness.torch_import import ImportedTorch, import_torch

__all__ = [
    "Benchmark",
    "ContentionTimer",
    "ImportedTorch",
    "Log",
    "ResultFiles",
    "blas_threads",
    "cpu_ticks",
    "gpt2_small_shapes",
    "import_torch",
    "loadavg",
    "machine_info",
    "machine_tag",
    "main",
    "median",
    "native_simd",
    "other_cpu_share",
    "positive_int",
    "results_dir",
    "rounds_for_medians",
    "run_benchmark",
    "time_interleaved",
    "write_results",
]

"""The head-to-head benchmark: each side runs in its own process and reports each window and
each micro-batch by position; the ratio of a round is its two medians'; the BLAS variables are
removed for the "unset" environment; the roofline counts the model's FLOPs; the breakdown adds
up. No time is asserted."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.end_to_end.breakdown import CATEGORIES, ours_breakdown
from benchmarks.end_to_end.cases import CHARS, DIGITS
from benchmarks.end_to_end.roofline import gemm_shapes, micro_batch_flops
from benchmarks.end_to_end.versus import (
    VERSUS,
    VersusSettings,
    _side_environment,
    environment_variants,
    format_versus,
    summarize_rounds,
)
from benchmarks.harness import run_benchmark
from benchmarks.harness.machine import blas_line

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _run(windows: list[float], k: int) -> dict:
    return {"items_per_micro_batch": 10, "by_k": {str(k): {"windows": windows, "cpu_windows": windows,
                                                            "positions": [[w / k for w in windows]] * k}}}


def test_a_rounds_ratio_is_its_two_medians_and_the_spread_covers_every_round() -> None:
    runs = [{"ours": _run([1.0, 2.0, 3.0], 2), "torch": _run([2.0, 4.0, 6.0], 2), "compiled": _run([1.0] * 3, 2)},
            {"ours": _run([1.0, 1.0, 1.0], 2), "torch": _run([1.0, 1.0, 1.0], 2), "compiled": _run([0.5] * 3, 2)}]
    row = summarize_rounds(runs, (2,))["2"]
    assert row["round_ratios"] == [2.0, 1.0]  # ours twice as fast, then as fast
    assert row["ratio"] == {"median": 1.5, "min": 1.0, "max": 2.0} == row["cpu_ratio"]
    assert row["round_ratios_compiled"] == [0.5, 0.5]
    assert row["ours_items_per_second"] == pytest.approx(20 / 1.0)  # median of 1, 2, 3, 1, 1, 1
    assert row["torch_ms_per_micro_batch"] == pytest.approx(1.5 / 2 * 1e3)  # median of 2, 4, 6, 1, 1, 1
    assert len(row["ms_per_micro_batch_by_position"]["compiled"]) == 2


def test_the_unset_environment_removes_the_blas_variables_and_is_skipped_when_none_is_set() -> None:
    assert environment_variants(("as set", "unset"), {}) == {"as set": [], "unset": None}
    variants = environment_variants(("as set", "unset"), {"OPENBLAS_CORETYPE": "Haswell", "PATH": "/bin"})
    assert variants == {"as set": [], "unset": ["OPENBLAS_CORETYPE"]}
    with pytest.raises(ValueError, match="unknown environment 'hot'"):
        environment_variants(("hot",), {})


def test_a_sides_environment_has_its_threads_and_lacks_what_is_removed(monkeypatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "1048576")
    kept = _side_environment(2, [])
    assert kept["OPENBLAS_CORETYPE"] == "Haswell" and kept["MTA_THREADS"] == kept["OPENBLAS_NUM_THREADS"] == "2"
    removed = _side_environment(1, ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"])
    assert "OPENBLAS_CORETYPE" not in removed and "OPENBLAS_L2_SIZE" not in removed


def test_the_roofline_counts_three_gemms_per_forward_gemm() -> None:
    b = 7
    mlp = sum(fan_in * fan_out for fan_in, fan_out in zip(DIGITS.dims, DIGITS.dims[1:], strict=False))
    assert micro_batch_flops(DIGITS, b) == {"gemm": 6 * b * mlp, "attention": 0, "total": 6 * b * mlp}
    tokens, e, vocab = 32 * CHARS.block_size, CHARS.n_embd, CHARS.config().vocab_size
    flops = micro_batch_flops(CHARS, 32)
    assert flops["gemm"] == 3 * 2 * tokens * (CHARS.n_layer * 12 * e * e + e * vocab)
    assert flops["attention"] == 12 * tokens * CHARS.block_size * e * CHARS.n_layer
    assert (tokens, e, 3 * e) in gemm_shapes(CHARS, 32) and (e, tokens, 3 * e) in gemm_shapes(CHARS, 32)


def test_the_breakdown_times_gemms_and_kernels_and_adds_up_to_the_wall_time() -> None:
    import minitorch_accum.kernels as K

    a = np.ones((64, 64), np.float32)

    def micro_batch() -> None:
        for _ in range(20):
            np.matmul(a, a)
        K.gelu_forward(a)
        sum(range(1000))

    result = ours_breakdown(micro_batch, 3)
    ms = result["ms_per_micro_batch"]
    assert list(ms) == list(CATEGORIES) and ms["gemm"] > 0
    assert ms["fused layer kernels"] > 0 or not K.native_available()
    assert sum(ms.values()) == pytest.approx(result["total_ms"])
    assert np.matmul.__name__ == "matmul"  # the timers are taken off again


def test_the_breakdown_counts_a_nested_product_once_and_sorts_the_stacks_and_bias_kernels() -> None:
    import minitorch_accum.kernels as K
    from minitorch_accum.backend.numpy_backend import NumpyBackend

    backend = NumpyBackend()
    a = np.ones((128, 128), np.float32)
    stack = np.ones((8, 32, 32), np.float32)
    row = np.ones(128, np.float32)

    def products() -> None:  # the Backend's matmul runs the native gemm: one product, timed once
        for _ in range(40):
            backend.matmul(a, a)

    result = ours_breakdown(products, 3)
    ms = result["ms_per_micro_batch"]
    assert ms["gemm"] <= result["total_ms"] * 1.001  # counted twice, it would pass the wall time
    assert ms["rest: Python and NumPy"] >= -1e-6

    def layers() -> None:
        for _ in range(5):
            backend.batched_matmul(stack, stack)
            if K.native_available():
                K.add_row_vector(a, row)
                K.sum_rows(a)

    ms = ours_breakdown(layers, 3)["ms_per_micro_batch"]
    assert ms["gemm"] > 0  # attention's stacked products are GEMM time, not "the rest"
    if K.native_available():
        assert ms["bias row kernels"] > 0
    from minitorch_accum.kernels.dispatch import host_module

    module = host_module()
    assert module is None or module.add_row_vector.__name__ == "add_row_vector"  # the timers are taken off


def test_the_blas_line_names_the_kernel_and_the_variables() -> None:
    machine = {"blas": [{"library": "numpy openblas", "version": "0.3.31", "architecture": "Haswell",
                         "threading_layer": "pthreads", "threads": 1}],
               "blas_environment": {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": None}}
    line = blas_line(machine)
    assert "kernel Haswell" in line and "OPENBLAS_CORETYPE=Haswell" in line and "OPENBLAS_L2_SIZE unset" in line


@pytest.mark.skipif(not HAS_TORCH, reason="the other side is PyTorch")
def test_each_side_in_its_own_process_writes_the_ratio_per_k(tmp_path: Path) -> None:
    settings = VersusSettings("test", (("digits_mlp", (1, 2), 32),), threads=(1,), rounds=1, windows=1, warmup=0,
                              sides=("ours", "torch"), environments=("as set",), breakdown_windows=1)
    payload, files = run_benchmark(VERSUS, settings, tmp_path)
    assert files.json.is_file()
    data = payload["environments"]["as set"]["digits_mlp"]["1"]
    for k in ("1", "2"):
        row = data["by_k"][k]
        assert math.isfinite(row["ratio"]["median"]) and row["ratio"]["median"] > 0
        assert math.isfinite(row["cpu_ratio"]["median"]) and row["cpu_ratio"]["median"] > 0
        assert len(row["ms_per_micro_batch_by_position"]["torch"]) == int(k)
    assert "MTA_THREADS=1" in data["thread_settings"]["ours"] and data["thread_settings"]["torch_threads"] == 1
    rates = data["roofline"]["gemm_rates"]
    assert rates["ours"] > 0 and rates["numpy"] > 0 and rates["torch"] > 0 and data["breakdown"]["micro_batches"] == 2
    assert data["roofline"]["limit_flops_per_second"] == max(rates["ours"], rates["torch"])  # NumPy's is not ours
    assert data["blas"]["ours"] and data["torch_blas"]["blas"]
    text = format_versus(payload)
    assert "ours/torch" in text and "kernel" in text and "roofline" in text


def _rate(flops_per_second: float, numpy: float | None = None) -> dict:
    rate = {"flops_per_second": flops_per_second, "by_shape": {"64x64x64": flops_per_second}}
    if numpy is not None:
        rate["numpy"] = {"flops_per_second": numpy}
    return rate


def test_the_roofline_takes_each_sides_median_rate_and_the_faster_as_the_limit() -> None:
    from benchmarks.end_to_end.versus import _roofline

    flops = micro_batch_flops(DIGITS, 4)["total"]
    runs = [{"ours": {"gemm_rate": _rate(r, n)}, "torch": {"gemm_rate": _rate(t)}, "compiled": {}}
            for r, n, t in ((100e9, 50e9, 150e9), (120e9, 70e9, 90e9), (110e9, 60e9, 160e9))]
    by_k = {"1": {"ours_ms_per_micro_batch": 9.0, "torch_ms_per_micro_batch": 1.0,
                  "compiled_ms_per_micro_batch": 1.0},
            "8": {"ours_ms_per_micro_batch": 2.0, "torch_ms_per_micro_batch": 4.0,
                  "compiled_ms_per_micro_batch": 8.0}}
    got = _roofline("digits_mlp", 4, (1, 8), runs, by_k)
    assert got["flops"] == micro_batch_flops(DIGITS, 4)
    assert got["gemm_rates"] == {"ours": 110e9, "numpy": 60e9, "torch": 150e9}  # medians of the rounds
    assert got["limit_flops_per_second"] == 150e9  # NumPy's is shown, never the limit
    assert got["gemm_shapes"] == {"64x64x64": 100e9}  # the first round's ours
    for side, ms in (("ours", 2.0), ("torch", 4.0), ("compiled", 8.0)):  # the largest k's row
        reached = got["reached"][side]
        assert reached["flops_per_second"] == pytest.approx(flops / (ms / 1e3), rel=1e-12)
        assert reached["share_of_limit"] == pytest.approx(flops / (ms / 1e3) / 150e9, rel=1e-12)
    # without any side's rate there is no limit, and no share
    bare = [{"ours": {}, "torch": {}}]
    none = _roofline("digits_mlp", 4, (8,), bare, {"8": {"ours_ms_per_micro_batch": 2.0,
                                                          "torch_ms_per_micro_batch": 4.0}})
    assert none["gemm_rates"] == {} and none["limit_flops_per_second"] is None
    assert none["reached"]["ours"]["share_of_limit"] is None and none["gemm_shapes"] is None
    assert none["reached"]["torch"]["flops_per_second"] == pytest.approx(flops / 4e-3, rel=1e-12)
    # one side's rate alone is the limit
    one = _roofline("digits_mlp", 4, (8,), [{"ours": {"gemm_rate": _rate(80e9, 200e9)}, "torch": {}}],
                    {"8": {"ours_ms_per_micro_batch": 2.0, "torch_ms_per_micro_batch": 4.0}})
    assert one["limit_flops_per_second"] == 80e9 and one["gemm_rates"] == {"ours": 80e9, "numpy": 200e9}


def test_the_roofline_lines_say_every_figure_in_its_unit() -> None:
    from benchmarks.end_to_end.versus import _roofline_lines

    # each figure just past a rounding boundary (x.5000001), so that a unit off by one part in 1e9 shows
    roofline = {"flops": {"gemm": 627.5000001e6, "attention": 50e6, "total": 677.5000001e6},
                "gemm_rates": {"ours": 150.5000001e9, "numpy": 95e9, "torch": 159e9},
                "reached": {"ours": {"flops_per_second": 56.50000001e9, "share_of_limit": 0.358},
                            "torch": {"flops_per_second": 60e9, "share_of_limit": None}}}
    payload = {"environments": {"as set": {"char_transformer": {"1": {"roofline": roofline}}}}}
    lines = _roofline_lines(payload)
    assert lines[:2] == ["", "roofline at the largest k: the model's FLOPs per micro-batch against the GEMM rate "
                             "measured on its own shapes (ours: the native float32 GEMM; torch: PyTorch's BLAS; numpy: "
                             "NumPy's OpenBLAS, which ours no longer runs, for comparison; the limit is the faster of "
                             "ours and torch)"]
    assert lines[2:] == ["  as set, char_transformer, 1 thread(s): 678 MFLOP per micro-batch (628 in GEMMs); GEMM "
                         "GFLOP/s on these shapes: ours 151, numpy 95, torch 159; reached: ours 57 GFLOP/s (36%), "
                         "torch 60 GFLOP/s"]

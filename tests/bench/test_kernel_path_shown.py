"""The kernel benchmark says which path ran the library's kernels: under MTA_KERNELS=emulated its
rows read emulated_*, never native_*, and every figure records its path."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness import run_benchmark
from benchmarks.kernels import KERNELS, Settings
from benchmarks.kernels.report import format_table
from minitorch_accum import kernels


def test_an_emulated_run_reads_emulated_in_its_table_and_figures(tmp_path: Path) -> None:
    settings = Settings(sizes=(1 << 10,), warmup=0, repeats=1, small_repeats=1, min_sample_bytes=1, model_divisor=64,
                        model_repeats=1, target_min_elements=1 << 10)
    with kernels.use_path("emulated"):
        payload, files = run_benchmark(KERNELS, settings, tmp_path)
    written = json.loads(files.json.read_text())
    assert written["settings"]["kernel_path"] == "emulated"
    for case in written["cases"]:
        for name, figure in case["variants"].items():
            if name.startswith("native_"):
                assert figure["path"] == "emulated", (case["case"], name)
            elif name.startswith("numpy_"):
                assert figure["path"] == "numpy", (case["case"], name)
    table = format_table(payload)
    assert "the library's kernels ran on: emulated" in table
    assert "emulated_arena" in table and "emulated_multi" in table and "native_arena" not in table
    assert files.png is not None and files.png.read_bytes()[:4] == b"\x89PNG"

"""The op-level benchmark runs end to end on tiny shapes and writes well-formed results (no
time is asserted: only that every figure is there, finite and positive)."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.harness import run_benchmark
from benchmarks.layer_ops import LAYER_OPS, Settings, main


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("layer_ops")
    settings = Settings(rows=64, embd=8, hidden=16, vocab=5, gemm_shapes=((64, 8, 4),), warmup=0, repeats=1,
                        gemm_repeats=1)
    run_benchmark(LAYER_OPS, settings, out, plot=False)
    return json.loads((out / "layer_ops-latest-cpu.json").read_text())


def test_every_case_has_positive_medians_and_ratios(tiny_run: dict) -> None:
    names = [c["case"] for c in tiny_run["cases"]]
    assert names == ["gelu (none)", "gelu (tanh)", "layer_norm", "cross_entropy", "embedding backward",
                     "softmax (attention)", "matmul 3-D @ 2-D", "weight-gradient GEMM"]
    for case in tiny_run["cases"]:
        assert case["median_ms"] and all(math.isfinite(v) and v > 0 for v in case["median_ms"].values())
        assert all(math.isfinite(v) and v > 0 for v in case["ratios"].values())
    with_torch = tiny_run["torch"] is not None
    targets = [c for c in tiny_run["cases"] if "target" in c]
    assert [c["case"] for c in targets] == ["gelu (none)", "layer_norm", "cross_entropy"]
    if with_torch:
        assert all("both" in c["ratios"] for c in targets)
        assert tiny_run["all_targets_met"] == all(c["target"]["met"] for c in targets)
    assert tiny_run["settings"]["threads"] == 1 and tiny_run["load_average"]["before"] is not None


def test_the_program_refuses_a_bad_thread_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--quick", "--threads", "0"])
    assert exit_info.value.code == 2
    assert "--threads" in capsys.readouterr().err

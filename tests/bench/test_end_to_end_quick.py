"""The end-to-end benchmark's core on tiny settings: the result file has every figure,
each finite (and positive where it is a time, a rate or a size). No time is asserted."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from benchmarks.end_to_end import END_TO_END, ModelSpec, Settings, TransformerCase, main
from benchmarks.harness import run_benchmark

HAS_TORCH = importlib.util.find_spec("torch") is not None
KS = (1, 2)
FUSIONS = ("none", "leaf", "gemm")


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _tiny_settings() -> Settings:
    toy = ModelSpec("toy_mlp", (8, 16, 4), "synthetic", repeats=1, warmup=0)
    return Settings(mode="test", models=(toy,), ks=KS, micro_batch=4, trace_windows=1, target_model="toy_mlp",
                    compare_torch=HAS_TORCH, threads=1)


def test_result_file_holds_every_figure_finite(tmp_path: Path) -> None:
    payload, files = run_benchmark(END_TO_END, _tiny_settings(), tmp_path)
    path = files.json
    assert path.parent == tmp_path and path.name.startswith("end_to_end-")
    machine = "gpu" if payload["machine"].get("gpu") else "cpu"
    latest = tmp_path / f"end_to_end-latest-{machine}.json"
    assert json.loads(latest.read_text()) == json.loads(path.read_text())
    saved = json.loads(path.read_text())
    assert {"machine", "settings", "environment", "definitions", "models", "targets"} <= set(saved)
    assert saved["settings"]["ks"] == list(KS) and saved["environment"]["blas_threads"] == 1

    model = saved["models"]["toy_mlp"]
    assert model["dims"] == [8, 16, 4] and model["parameters"] == 8 * 16 + 16 + 16 * 4 + 4
    assert model["parameters_finite_after"] is True
    timing = model["timing"]
    assert timing["basis"] in ("quiet rounds", "all rounds") and timing["rounds_used"]
    assert len(timing["round_other_processes_cpu_share"]) == 1
    assert set(model["by_k"]) == {str(k) for k in KS}
    for k in KS:
        row = model["by_k"][str(k)]
        assert _positive(row["plain"]["micro_step_seconds"]) and len(row["plain"]["samples"]) == 1
        assert set(row["fusions"]) == set(FUSIONS)
        for fusion in FUSIONS:
            f = row["fusions"][fusion]
            for key in ("micro_step_seconds", "window_seconds", "update_seconds", "items_per_second"):
                assert _positive(f[key]), (k, fusion, key, f[key])
            # overheads may be negative (the arena can beat a fresh gradient per micro-batch)
            for key in ("overhead_share", "overhead_share_paired", "overhead_seconds_per_micro_batch"):
                assert _finite(f[key]) and f[key] < 1.0, (k, fusion, key, f[key])
            assert _finite(f["direct_share"]) and f["direct_share"] >= 0
            trace = f["trace"]
            assert trace["kernels"] and _finite(trace["accumulation_seconds_per_micro_batch"])
            assert all(_positive(kern["calls_per_micro_batch"]) for kern in trace["kernels"].values())
            assert (trace["gemm_seconds_per_micro_batch"] > 0) == (fusion == "gemm")
            assert len(f["samples"]["total"]) == len(f["samples"]["accumulate"]) == 1
            if HAS_TORCH:
                assert _positive(f["vs_torch"])
        assert set(row["all_rounds"]["fusions"]) == set(FUSIONS)
        assert all(_positive(f["items_per_second"]) for f in row["all_rounds"]["fusions"].values())
        if HAS_TORCH:
            assert _positive(row["torch"]["items_per_second"]) and _positive(row["torch"]["micro_step_seconds"])
        else:
            assert row["torch"] is None

    assert set(model["memory"]) == {"gemm", "leaf"}
    for by_k in model["memory"].values():
        for k in KS:
            entry = by_k[str(k)]
            assert _positive(entry["micro_batch_peak_bytes"]) and _positive(entry["full_batch_peak_bytes"])
            assert len(entry["micro_batch_peaks"]) == k and _positive(entry["ratio"])
            assert entry["ideal_ratio"] == pytest.approx(1 / k)

    names = {t["name"] for t in saved["targets"]}
    assert {"gemm_accumulation_overhead", "peak_memory_ratio_gemm", "peak_memory_ratio_leaf",
            "items_per_second_vs_torch_gemm"} <= names
    for target in saved["targets"]:
        assert {"model", "k", "threshold", "comparison", "measured", "met"} <= set(target)
        if target["name"].startswith("items_per_second_vs_torch") and not HAS_TORCH:
            assert target["measured"] is None and target["met"] is None
        else:
            assert _finite(target["measured"]) and isinstance(target["met"], bool)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / f"end_to_end-latest-{machine}.png").stat().st_size > 0


def test_command_line_prints_the_ratio_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["--quick", "--models", "digits_mlp", "--ks", "1,2", "--repeats", "1", "--no-torch", "--no-plot",
            "--out", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "digits_mlp (64-128-10" in out and "acc gemm" in out and "peak_memory_ratio_gemm" in out
    assert list(tmp_path.glob("end_to_end-latest-*.json"))


@pytest.mark.skipif(mta.cuda_available(), reason="checks the refusal on a machine without a GPU")
def test_cuda_without_a_gpu_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--device", "cuda", "--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


TINY_TRANSFORMER = TransformerCase("tiny_transformer", block_size=8, n_layer=1, n_head=2, n_embd=16, repeats=1,
                                   warmup=0)


@pytest.mark.skipif(not HAS_TORCH, reason="the PyTorch twin needs torch")
def test_the_transformer_twin_has_our_weights_tied_head_and_gradients() -> None:
    import torch

    rng = np.random.default_rng(0)
    ours = TINY_TRANSFORMER.model("cpu", rng)
    ids, targets = TINY_TRANSFORMER.data(6, rng)
    theirs = TINY_TRANSFORMER.torch_model(torch, ours)
    assert theirs.wte.weight is theirs.head.weight  # tied there too: one parameter, both gradients in it
    assert len(list(theirs.parameters())) == len(ours.parameters())
    loss = TINY_TRANSFORMER.loss(ours, mta.tensor(ids), mta.tensor(targets))
    grads = loss.backward()
    their_loss = TINY_TRANSFORMER.torch_loss(torch, theirs, torch.from_numpy(ids), torch.from_numpy(targets))
    their_loss.backward()
    # float32, the same operations in another order: a few ulps of a loss summed over 48 items
    np.testing.assert_allclose(loss.item(), their_loss.item(), rtol=1e-5)
    their_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        mine = np.asarray(grads[p])
        mine = mine.T if p.layout == "in_out" else mine
        np.testing.assert_allclose(mine, their_params[name].grad.numpy(), rtol=1e-3, atol=1e-5, err_msg=name)


def test_the_transformer_case_runs_end_to_end_at_one_kth_of_the_memory(tmp_path: Path) -> None:
    settings = Settings(mode="test", models=(TINY_TRANSFORMER,), ks=(1, 4), micro_batch=4, trace_windows=1,
                        target_model="tiny_transformer", compare_torch=HAS_TORCH, threads=1)
    payload, _ = run_benchmark(END_TO_END, settings, tmp_path)
    model = payload["models"]["tiny_transformer"]
    assert model["items_per_micro_batch"] == 4 * 8 and model["block_size"] == 8
    assert model["parameters_finite_after"] is True
    for k in ("1", "4"):
        row = model["by_k"][k]
        for f in row["fusions"].values():
            assert _positive(f["items_per_second"])
            if HAS_TORCH:
                assert _positive(f["vs_torch"])
    for fusion, by_k in model["memory"].items():
        entry = by_k["4"]
        # activations grow with batch x block: one micro-batch's arrays are 1/k of the big batch's
        assert 0.9 / 4 <= entry["ratio"] <= 1.1 / 4, (fusion, entry)
        assert entry["micro_batch_total_bytes"] >= entry["micro_batch_peak_bytes"] > 0

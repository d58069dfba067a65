"""Data parallelism on 2 ranks, launched by mpiexec: R x k x b is one window of R*k*b items.

Each test starts its ranks with ``python -m mpi4py`` (so a failing rank aborts the job) under
a 60 s timeout, and checks what rank 0 wrote against a single process run here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import rank_windows
from tests.distributed.launcher import run_ranks
from tests.distributed.rank_programs import WINDOW_CASES, B, K, TokenModel, fit, summed_loss, token_data

pytestmark = pytest.mark.mpi

RANKS = 2


@pytest.fixture(scope="module")
def two_rank_windows(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    out = tmp_path_factory.mktemp("window")
    run_ranks(RANKS, ["tests.distributed.rank_programs", "window", str(out)])
    saved = np.load(out / "window.npz")
    grads: dict = {}
    for key in saved.files:
        case, w, name = key.split("/", 2)
        grads.setdefault(case, {}).setdefault(int(w), {})[name] = saved[key]
    return grads, json.loads((out / "window.json").read_text())


def _big_batch_grads(first: int, stop: int) -> tuple[dict[str, np.ndarray], int]:
    """The gradient of the window's items as one batch, normalized by its items."""
    ids, targets = token_data()
    order = np.random.default_rng(5).permutation(len(ids))
    rows = order[first * B:stop * B]
    model = TokenModel()
    loss, items = summed_loss(model, ids[rows], targets[rows])
    grads = loss.backward()
    return {name: np.asarray(grads[p]) / items for name, p in model.named_parameters()}, items


@pytest.mark.parametrize(("fusion", "compensated"), WINDOW_CASES)
def test_ranks_x_k_x_b_equal_one_big_batch_in_float64(two_rank_windows: tuple, fusion: str,
                                                      compensated: bool) -> None:
    grads, _ = two_rank_windows
    windows = rank_windows(-(-len(token_data()[0]) // B), K, RANKS, 0)
    # 15 sequences in micro-batches of 2: the last window holds 2 of its 6 micro-batches, both
    # on rank 0, so rank 1 takes part with none; items per micro-batch differ (padding)
    assert [(w.first, w.stop) for w in windows] == [(0, 6), (6, 8)]
    assert rank_windows(8, K, RANKS, 1)[1].batches == ()
    for w, share in enumerate(windows):
        expected, _ = _big_batch_grads(share.first, share.stop)
        got = grads[f"{fusion}-{int(compensated)}"][w]
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=1e-12, err_msg=f"window {w} {name}")


@pytest.mark.parametrize(("fusion", "compensated"), WINDOW_CASES)
def test_exactly_one_gradient_allreduce_per_window(two_rank_windows: tuple, fusion: str, compensated: bool) -> None:
    _, calls = two_rank_windows
    # the arena is one bucket: one gradient all-reduce per window, never one per micro-batch (6 here);
    # the window's facts (counts, flags, written parameters; GEMM bounds) are two small int64/float64 ones
    facts = calls[f"{fusion}-{int(compensated)}"]
    assert (facts["calls"], facts["buckets"]) == ({"allreduce": 2, "allreduce_facts": 4}, 1)


@pytest.mark.parametrize(("fusion", "compensated"), WINDOW_CASES)
def test_overlapped_bucket_reductions_give_the_same_sums(two_rank_windows: tuple, fusion: str,
                                                         compensated: bool) -> None:
    grads, calls = two_rank_windows
    case = f"{fusion}-{int(compensated)}"
    overlapped = calls[f"{case}-overlap"]
    assert overlapped["buckets"] > 2  # small buckets: several to start during the last backward
    assert overlapped["calls"]["allreduce"] == 2 * overlapped["buckets"]  # still one reduction per window
    # rank 0 holds micro-batches in both windows: some buckets started while its last backward ran
    assert all(started > 0 for started in overlapped["started_during_backward"])
    assert calls[case]["started_during_backward"] == [0, 0]
    for w, window in grads[case].items():
        for name, value in window.items():
            np.testing.assert_array_equal(grads[f"{case}-overlap"][w][name], value, err_msg=f"{w} {name}")


def test_compensated_window_is_bit_identical_to_one_process(two_rank_windows: tuple) -> None:
    grads, _ = two_rank_windows
    ids, targets = token_data()
    order = np.random.default_rng(5).permutation(len(ids))
    model = TokenModel()
    acc = Accumulator(model, steps=K * RANKS, fusion="leaf", accum_dtype="float64", compensated=True)
    for w, share in enumerate(rank_windows(-(-len(ids) // B), K * RANKS)):
        for index in share.batches:
            rows = order[index * B:(index + 1) * B]
            loss, items = summed_loss(model, ids[rows], targets[rows])
            acc.backward(loss, num_items=items)
        single = acc.grads()
        for name, p in model.named_parameters():
            np.testing.assert_array_equal(grads["leaf-1"][w][name], np.asarray(single[p]), err_msg=f"{w} {name}")
        acc.zero()


def _params(directory: Path) -> dict[str, np.ndarray]:
    return dict(np.load(directory / "params.npz"))


def test_learner_on_two_ranks_gives_the_parameters_of_one_process_bit_for_bit(tmp_path: Path) -> None:
    # float64, compensated: the window's sums do not depend on how they are split over ranks
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path / "two"), "k=3", "epochs=2",
                      "compensated=1"])
    fit(tmp_path / "one", k=6, epochs=2, compensated=True, distributed=False)
    two, one = _params(tmp_path / "two"), _params(tmp_path / "one")
    for name in one:
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)
    steps_two = json.loads((tmp_path / "two" / "history.json").read_text())["steps"]
    steps_one = json.loads((tmp_path / "one" / "history.json").read_text())["steps"]
    assert [s["items"] for s in steps_two] == [s["items"] for s in steps_one] == [24, 24, 24, 24, 5] * 2
    assert [s["loss"] for s in steps_two] == pytest.approx([s["loss"] for s in steps_one], rel=1e-12)


def test_zero1_equals_plain_data_parallel(tmp_path: Path) -> None:
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path / "dp"), "k=3", "epochs=1",
                      "compensated=0"])
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path / "zero"), "k=3", "epochs=1",
                      "compensated=0", "zero=1"])
    dp, zero = _params(tmp_path / "dp"), _params(tmp_path / "zero")
    for name in dp:  # the same sums and the same elementwise step; only the clipping norm sums in another order
        np.testing.assert_allclose(zero[name], dp[name], rtol=0, atol=1e-12, err_msg=name)
    facts = {run: json.loads((tmp_path / run / "facts.json").read_text()) for run in ("dp", "zero")}
    assert facts["zero"]["stepper"] == "ZeroRedundancyOptimizer"
    assert facts["zero"]["calls"]["reduce_scatter"] == 5 and "allreduce" not in facts["zero"]["calls"]
    assert facts["dp"]["calls"]["allreduce"] == 5 and "reduce_scatter" not in facts["dp"]["calls"]
    # AdamW keeps two moments per element: all of them on a plain rank, its half on a ZeRO-1 rank
    parameters = facts["dp"]["parameters"]
    assert facts["dp"]["optimizer_state_elements"] == 2 * parameters
    assert facts["zero"]["optimizer_state_elements"] <= parameters + 16


def test_zero1_checkpoints_hold_whole_tensors_and_resume_on_one_rank(tmp_path: Path) -> None:
    fit(tmp_path / "whole", k=6, epochs=2, compensated=True, distributed=False)
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path / "zero"), "k=3", "epochs=1",
                      "compensated=1", "zero=1"])
    fit(tmp_path / "zero", k=3, epochs=2, compensated=True, resume=True)
    whole, resumed = _params(tmp_path / "whole"), _params(tmp_path / "zero")
    for name in whole:
        np.testing.assert_array_equal(resumed[name], whole[name], err_msg=name)


def test_resume_on_two_ranks_from_a_one_rank_checkpoint_and_back(tmp_path: Path) -> None:
    fit(tmp_path / "whole", k=6, epochs=2, compensated=True, distributed=False)
    # one rank for epoch 0, two for epoch 1 (k per rank 6 -> 3 keeps the window of 6 micro-batches)
    fit(tmp_path / "up", k=6, epochs=1, compensated=True)
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path / "up"), "k=6", "epochs=2",
                      "compensated=1", "resume=1"])
    # two ranks for epoch 0, one for epoch 1 (k 3 -> 6)
    run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path / "down"), "k=3", "epochs=1",
                      "compensated=1"])
    fit(tmp_path / "down", k=3, epochs=2, compensated=True, resume=True)
    whole = _params(tmp_path / "whole")
    for run in ("up", "down"):
        resumed = _params(tmp_path / run)
        for name in whole:
            np.testing.assert_array_equal(resumed[name], whole[name], err_msg=f"{run}: {name}")


def test_a_failing_rank_aborts_the_job_within_seconds(tmp_path: Path) -> None:
    started = time.perf_counter()
    result = run_ranks(RANKS, ["tests.distributed.rank_programs", "fit", str(tmp_path), "k=3", "epochs=50",
                               "compensated=0", "fail_at=7"], check=False, timeout=60)
    elapsed = time.perf_counter() - started
    assert result.returncode != 0
    assert "rank 1 fails on purpose" in result.stderr
    assert elapsed < 20, f"the job took {elapsed:.1f} s to end after rank 1 failed"


def test_the_readme_launch_line_gives_the_single_process_parameters_bit_for_bit(tmp_path: Path) -> None:
    import subprocess
    import sys

    from safetensors.numpy import load_file

    # the README's line (2 ranks, --accum 4) with float64 and compensation, against one process with --accum 8
    common = ["train", "--dataset", "digits", "--micro-batch", "32", "--dtype", "float64", "--compensated",
              "--epochs", "1", "--progress", "plain", "--checkpoint-every", "4"]
    launched = run_ranks(RANKS, ["minitorch_accum.cli", *common, "--accum", "4", "--out", str(tmp_path / "two")])
    assert launched.stdout.count("trained 6 optimizer steps") == 1  # rank 0 alone reports
    assert "numerics" not in launched.stdout + launched.stderr  # ranks that compute alike: nothing to say
    subprocess.run([sys.executable, "-m", "minitorch_accum.cli", *common, "--accum", "8", "--out",
                    str(tmp_path / "one")], check=True, capture_output=True, timeout=120)
    two = load_file(str(tmp_path / "two" / "final.safetensors"))
    one = load_file(str(tmp_path / "one" / "final.safetensors"))
    for name in one:
        np.testing.assert_array_equal(two[name], one[name], err_msg=name)
    lines = [json.loads(s) for s in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    assert [r["items"] for r in lines if r["kind"] == "train"][-1] == 1438 - 5 * 256  # the partial window


def test_explain_under_mpiexec_shows_the_reduction_and_the_check() -> None:
    result = run_ranks(RANKS, ["minitorch_accum.cli", "explain", "--accum", "2", "--micro-batch", "8"])
    out = result.stdout
    assert out.count("One window of k=2 micro-batches of 8 items on each of 2 ranks (window of 4)") == 1
    assert "reduction over the ranks: 2 ranks, one reduction per window over 1 bucket(s)" in out
    assert "bucket 0 [0:" in out and "allreduce" in out
    assert "divide the summed gradient by the window's 32 items" in out
    assert "verdict: EQUAL within rounding" in out
    assert out.count("numerics: this process computes with BLAS ") == 1
    assert "Bit for bit needs every rank" in out and "rank 1 with" not in out  # the ranks compute alike

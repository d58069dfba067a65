"""``maccum compare --dataset chars`` end to end on tiny settings: the memory ratio it prints is
the ratio of the array peaks its runs measured (the same figures their progress lines and
metrics show), within 10% of 1/k, and the loss curves of k x b and k*b coincide."""

from __future__ import annotations

import contextlib
import io
import json
import statistics
from pathlib import Path

import pytest

from minitorch_accum.cli import main
from minitorch_accum.train.progress import format_bytes

K, B, BLOCK = 4, 64, 8


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("compare")
    buffer = io.StringIO()  # capsys is per test; the three runs are shared by the module's tests
    with contextlib.redirect_stdout(buffer):
        status = main(["compare", "--dataset", "chars", "--block-size", str(BLOCK), "--micro-batch", str(B),
                       "--accum", str(K), "--epochs", "1", "--dtype", "float64", "--out", str(out),
                       "--progress", "plain"])
    assert status == 0
    return out, buffer.getvalue()


def _steps(directory: Path) -> list[dict]:
    lines = [json.loads(s) for s in (directory / "metrics.jsonl").read_text().splitlines()]
    return [r for r in lines if r["kind"] == "train"]


def test_the_ratio_is_the_ratio_of_the_measured_array_peaks(compared: tuple[Path, str]) -> None:
    out, printed = compared
    saved = json.loads((out / "compare.json").read_text())
    accumulated, big, plain = saved["runs"]
    assert (accumulated["name"], big["name"], plain["name"]) == (f"{K} x {B}", f"{K * B}", f"{B}")
    assert accumulated["k_used"] == K and big["k_used"] == 1
    for run, directory in ((accumulated, f"b{B}_k{K}"), (big, f"b{K * B}_k1")):
        steps = _steps(out / directory)
        # the run's figure is its metrics' per-step array peak, over its fullest windows
        most = max(r["items"] for r in steps)
        assert most == K * B * BLOCK  # a full window: k x b rows of BLOCK target characters
        assert run["array_bytes"] == statistics.median(r["peak_array_bytes"] for r in steps if r["items"] == most)
        assert run["per_step_array_bytes"] == [r["peak_array_bytes"] for r in steps]
        # ... and the progress lines printed that same figure
        assert f"act {format_bytes(run['array_bytes'])} arrays" in printed
    ratio = accumulated["array_bytes"] / big["array_bytes"]
    assert saved["memory_ratio"] == ratio
    table = (out / "compare.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith(f"| {K} x {B} (accumulated)"))
    assert row.split("|")[10].strip() == f"{ratio:.3f}"
    assert row.split("|")[8].strip() == format_bytes(accumulated["array_bytes"])
    # activations of a transformer grow with batch x block: the arrays of one micro-batch are
    # 1/k of the big batch's within the 10%, and the summary says so
    assert 0.9 / K <= ratio <= 1.1 / K
    assert f"used {ratio:.3f} of the activation arrays of {K * B}" in printed
    assert f"within 10% of 1/k ({0.9 / K:.3f} to {1.1 / K:.3f})" in printed
    # Python objects are measured apart, and do not grow with the micro-batch the way arrays do
    assert 0 < big["other_bytes"] < 2 * accumulated["other_bytes"]


def test_the_loss_curves_of_k_x_b_and_k_b_coincide(compared: tuple[Path, str]) -> None:
    out, printed = compared
    accumulated, big, _ = json.loads((out / "compare.json").read_text())["runs"]
    assert [items for items, _ in accumulated["curve"]] == [items for items, _ in big["curve"]]
    assert len(accumulated["curve"]) == accumulated["steps"] > 3
    # float64: the window's gradient is the big batch's up to the order of its sums (~1e-16
    # relative); AdamW carries that rounding forward, but over 15 steps it stays far below
    # 1e-10 (float32 runs part at 1e-7..1e-4 this way). A window that lost or repeated a
    # micro-batch, or covered other items than the big batch, would move the first update and
    # every loss after it by orders of magnitude more
    gaps = [abs(a - b) for (_, a), (_, b) in zip(accumulated["curve"], big["curve"], strict=True)]
    assert max(gaps) <= 1e-10
    assert accumulated["curve"][-1][1] < accumulated["curve"][0][1] - 0.5  # and they do train
    assert "take the same" in printed and "the same training" in printed


def test_the_figure_is_written(compared: tuple[Path, str]) -> None:
    out, _ = compared
    png = (out / "compare.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000


def test_a_run_is_judged_by_its_full_windows_not_a_short_last_one() -> None:
    from minitorch_accum.cli.compare_command import memory_statistic

    def record(step: int, items: int, arrays: int, total: int) -> dict:
        return {"step": step, "items": items, "peak_array_bytes": arrays, "peak_activation_bytes": total}

    # one big batch of 256 then the epoch's last 193 items: the figure is the 256's, not an average
    stat = memory_statistic([record(1, 256, 1000, 1300), record(2, 193, 760, 1040)])
    assert stat["array_bytes"] == 1000 and stat["other_bytes"] == 300 and stat["largest_window_steps"] == [1]
    assert stat["per_step_array_bytes"] == [1000, 760] and stat["per_step_other_bytes"] == [300, 280]
    with pytest.raises(ValueError, match="made no optimizer step"):
        memory_statistic([])

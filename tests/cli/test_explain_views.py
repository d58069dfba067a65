"""``maccum explain --trace-out --figure``: the window in Perfetto, in PyTorch's memory viewer and
as a figure of k spans beside one; the header says which kernel path ran."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from minitorch_accum import kernels
from minitorch_accum.cli import main
from minitorch_accum.cli.explain_views import record_window
from minitorch_accum.cli.main import build_parser
from minitorch_accum.cli.window_figure import window_figure
from minitorch_accum.distributed import LocalCommunicator
from minitorch_accum.train.settings import read_options
from tests.drawn_overlap import covered, drawn
from tests.trace_events import check_trace_event_format, complete, inside

K, B = 3, 8


def explain_values(*extra: str) -> dict:
    return read_options(build_parser().parse_args(["explain", "--accum", str(K), "--micro-batch", str(B), *extra]),
                        "explain")


def test_explain_writes_the_trace_the_snapshot_and_the_figure(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trace_out, figure = tmp_path / "w.json", tmp_path / "w.png"
    assert main(["explain", "--accum", str(K), "--micro-batch", str(B), "--trace-out", str(trace_out),
                 "--figure", str(figure)]) == 0
    out = capsys.readouterr().out
    # in the order the window first ran them: a Linear's weight product and its bias's gradient come in one step
    assert "kernels ran on: " in out and "native (copy_scale, add_scale, multi_adamw_step)" in out
    assert "blas (gemm-beta0, gemm-beta1)" in out
    snapshot = tmp_path / "w.snapshot.pickle"
    for path in (trace_out, snapshot, figure):
        assert f"wrote {path}" in out
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads(trace_out.read_text())
    events = check_trace_event_format(record)
    # the window, then one batch of the same items: one iteration each
    assert [e["name"] for e in complete(events, cat="window") if e["name"].startswith("ProfilerStep")] == [
        "ProfilerStep#0", "ProfilerStep#1"]
    assert len(complete(events, "forward")) == K + 1 and len(complete(events, "optimizer step")) == 2
    # each forward replayed as training does: the window's captured, checked, replayed; the big batch's captured
    assert [e["args"]["replay"] for e in complete(events, "forward")] == ["captured", "checked", "replayed",
                                                                           "captured"]
    assert record["otherData"]["recordings"] == [f"{K} x {B}", f"1 x {K * B}"]
    lanes = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert f"{K} x {B}: micro-batches" in lanes and f"1 x {K * B}: arena writes" in lanes
    loaded = pickle.loads(snapshot.read_bytes())
    assert loaded["device_traces"][0] and loaded["segments"]
    # every forward and backward lies in its micro-batch's span, on the same track, from its first instant
    micro = complete(events, cat="micro_batch")
    for phase in ("forward", "backward"):
        for span in complete(events, phase):
            holders = [m for m in micro if m["name"].startswith("micro-batch ") and m["tid"] == span["tid"]
                       and inside(span, m, slack_us=0.002)]
            assert len(holders) == 1, span
    # the fused step, inside each recording's "optimizer step" span, with the scale it folded in
    for step in complete(events, "optimizer step"):
        launches = [e for e in complete(events, cat="optimizer") if e["tid"] == step["tid"] and inside(e, step)]
        assert [e["name"] for e in launches] == ["multi_adamw_step"]  # one launch over the MLP's four tensors
        assert launches[0]["args"]["grad_scale"] == 1 / (K * B)  # items: 1/N, the same N in both


# HTA 0.5 calls pandas with arguments pandas deprecates; they are HTA's to change, not our files'
@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_holistic_trace_analysis_reads_both_recordings_when_told_to_keep_the_last_step(tmp_path: Path) -> None:
    pytest.importorskip("hta")
    from hta.trace_analysis import TraceAnalysis

    assert main(["explain", "--accum", str(K), "--micro-batch", str(B), "--trace-out", str(tmp_path / "w.json")]) == 0
    spans = complete(json.loads((tmp_path / "w.json").read_text())["traceEvents"])
    # by default HTA drops the last ProfilerStep: the whole 1 x 24 recording (docs/observability.md says so)
    assert TraceAnalysis(trace_dir=str(tmp_path)).t.get_iterations(0) == [0]
    analysis = TraceAnalysis(trace_dir=str(tmp_path), include_last_profiler_step=True)
    assert analysis.t.get_iterations(0) == [0, 1]
    frame = analysis.t.get_trace(0)
    assert len(frame) == len(spans) and frame["dur"].min() >= 0
    names = analysis.t.symbol_table.get_sym_table()
    assert sorted(names[i] for i in frame["name"]) == sorted(e["name"] for e in spans)


def test_the_header_names_the_path_mta_kernels_chose(capsys: pytest.CaptureFixture) -> None:
    with kernels.use_path("reference"):
        assert main(["explain", "--accum", "2", "--micro-batch", "4", "--fusion", "leaf"]) == 0
    out = capsys.readouterr().out
    assert "kernels ran on: reference (copy_scale, add_scale, multi_adamw_step)" in out and "native (" not in out


def test_the_figure_shows_k_micro_batches_beside_one() -> None:
    comm = LocalCommunicator()
    values = explain_values()
    traces = [record_window(values, K, B, comm, f"{K} x {B}"), record_window(values, 1, K * B, comm, "1 x 24")]
    figure = window_figure(traces)
    timelines = [ax for ax in figure.axes if ax.get_title()]
    step = f"step: multi_adamw_step, the scale {1 / (K * B):.3g} folded in"
    assert [ax.get_title() for ax in timelines] == [f"{K} x {B}: {K} micro-batches\n{step}",
                                                    f"1 x 24: 1 micro-batch\n{step}"]
    for ax, k in zip(timelines, (K, 1), strict=True):
        bars = {c.get_label(): len(c.get_paths()) for c in ax.collections}
        assert bars["forward"] == bars["backward"] == k
        assert bars["optimizer step"] == bars["close"] == 1
        assert bars["fused step kernel (folds the scale in)"] == 1  # one launch over the MLP's four tensors
        assert bars["GEMM-fused write"] == 2 * k  # two weights per micro-batch
    memory = [ax for ax in figure.axes if not ax.get_title()]
    curves = [line for line in memory[0].get_lines() if line.get_label().startswith("array bytes alive")]
    assert curves and max(curves[0].get_ydata()) > 0


@pytest.mark.parametrize("extra", [(), ("--dataset", "chars", "--dtype", "float32", "--block-size", "8")])
def test_nothing_is_drawn_over_the_curves_the_bars_or_another_label(extra: tuple[str, ...]) -> None:
    comm = LocalCommunicator()
    values = explain_values(*extra)
    figure = window_figure([record_window(values, K, B, comm, f"{K} x {B}"),
                            record_window(values, 1, K * B, comm, f"1 x {K * B}")])
    assert covered(figure) == []
    renderer = drawn(figure)
    memory = [ax for ax in figure.axes if not ax.get_title()]
    peaks = [text for ax in memory for text in ax.texts if text.get_text().startswith("micro-batch peak")]
    assert len(peaks) == 2
    for ax, text in zip(memory, peaks, strict=True):  # each inside its panel, over its curve
        assert ax.get_window_extent(renderer).contains(*text.get_window_extent(renderer).p0)
        assert ax.get_window_extent(renderer).contains(*text.get_window_extent(renderer).p1)
    (legend,) = figure.legends
    assert all(legend.get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0 for ax in figure.axes)


def test_trace_and_figure_names_are_checked_before_anything_runs(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", "--trace-out", str(tmp_path / "w.txt")]) == 2
    assert "--trace-out must end in .json" in capsys.readouterr().err
    assert main(["explain", "--figure", str(tmp_path / "w.svg")]) == 2
    assert "--figure must be a file name ending in .png" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())

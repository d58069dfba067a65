"""What an Accumulator lets one observe: its memory report, its trace (written to a path, recorded
into the trace one hands it, hearing the optimizer's fused step) and how a forward made by
``acc.capture`` ran (survivors of the accum layer's mutation run: these were read only by tests
outside the layer's selection, or not at all)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import ReplayReport
from minitorch_accum.nn import functional as F
from minitorch_accum.observe.memory import MemoryReport, array_bytes
from minitorch_accum.observe.trace import AccumulationTrace
from tests.accum.helpers import data, max_difference, mlp, summed_loss, window_grads


def _micro_batch(acc: Accumulator, model, rows: slice) -> None:
    x, y = data()
    acc.backward(summed_loss(model, x[rows], y[rows], "float32"), num_items=rows.stop - rows.start)


# ------------------------------------------------------------------ the memory report
def test_the_memory_report_counts_parameters_store_optimizer_state_and_the_last_micro_batch() -> None:
    model = mlp("float32")
    acc = Accumulator(model, steps=3)
    parameters = sum(p.data.nbytes for p in model.parameters())
    assert acc.memory_report() == MemoryReport(parameters=parameters, arena=acc.store.nbytes, optimizer_state=0,
                                               activations=0)
    assert acc.activation_peaks == []
    for rows in (slice(0, 2), slice(2, 26), slice(0, 1)):  # the middle micro-batch is the largest
        with acc.micro_batch():
            _micro_batch(acc, model, rows)
    first, largest, last = acc.activation_peaks
    assert largest > first > 0 and largest > last > 0
    opt = optim.Adam(1e-3)
    opt.step(model, acc)
    state = array_bytes(opt.state)
    assert state >= 2 * parameters  # Adam's two moments
    assert acc.memory_report(opt) == MemoryReport(parameters=parameters, arena=acc.store.nbytes,
                                                  optimizer_state=state, activations=last)
    assert acc.memory_report(object()).optimizer_state == 0  # an optimizer without state holds none


# ------------------------------------------------------------------------ the trace
@pytest.mark.parametrize("kind", [str, Path])
def test_a_trace_asked_for_by_path_is_written_there_at_the_end_of_every_window(tmp_path: Path, kind: type) -> None:
    model = mlp("float32")
    path = tmp_path / "window.json"
    acc = Accumulator(model, steps=1, trace=kind(path))
    assert isinstance(acc.trace, AccumulationTrace) and not path.exists()
    for window in range(2):
        _micro_batch(acc, model, slice(0, 3))
        acc.zero()
        names = {event["name"] for event in json.loads(path.read_text())["traceEvents"]}
        assert f"ProfilerStep#{window}" in names and "backward" in names


def test_a_trace_handed_in_is_the_one_recorded_into_and_hears_the_optimizers_fused_step() -> None:
    model = mlp("float32")
    trace = AccumulationTrace()
    acc = Accumulator(model, steps=2, trace=trace)
    assert acc.trace is trace
    for rows in (slice(0, 3), slice(3, 7)):
        _micro_batch(acc, model, rows)
    optim.Adam(1e-3).step(model, acc)
    steps = [event for event in trace.events if event.kernel == "multi_adamw_step"]
    assert len(steps) == 1 and steps[0].scale == pytest.approx(1 / 7)  # the window's 7 items folded in
    assert {"copy_scale", "add_scale"} <= trace.kernels_used()


# ------------------------------------------------------------- a captured forward
def _loss_of(model):
    return lambda xb, yb: F.cross_entropy(model(xb), yb, reduction="sum")


def _inputs(part: int) -> tuple[mta.Tensor, np.ndarray]:
    x, y = data()
    rows = slice(3 * part, 3 * part + 3)
    return mta.tensor(x[rows], dtype="float32"), y[rows]


def test_a_captured_forward_replays_from_its_third_call_and_the_trace_says_how_each_ran() -> None:
    model, eager_model = mlp("float32"), mlp("float32")
    acc = Accumulator(model, steps=4, trace=True)
    eager = Accumulator(eager_model, steps=4)
    heard: list[ReplayReport] = []
    step = acc.capture(_loss_of(model), listener=heard.append)
    assert acc.forward_replay is None
    ran = []
    for part in range(4):
        loss = step(*_inputs(part))
        ran.append(acc.forward_replay)
        acc.backward(loss, num_items=3)
        assert acc.forward_replay is None  # said of the micro-batch it made, not of the next one
        eager.backward(_loss_of(eager_model)(*_inputs(part)), num_items=3)
    assert ran == ["captured", "checked", "replayed", "replayed"]
    assert [report.outcome for report in heard] == ran
    assert [span.args["replay"] for span in acc.trace.spans if span.name == "backward"] == ran
    assert max_difference(window_grads(acc, model), window_grads(eager, eager_model)) == 0.0


def test_a_captured_forward_reads_the_models_parameters_afresh_after_a_step() -> None:
    model, eager_model = mlp("float32"), mlp("float32")
    acc, eager = Accumulator(model, steps=1), Accumulator(eager_model, steps=1)
    step = acc.capture(_loss_of(model))
    opt, eager_opt = optim.SGD(0.5), optim.SGD(0.5)
    for part in range(5):
        acc.backward(step(*_inputs(part)), num_items=3)
        eager.backward(_loss_of(eager_model)(*_inputs(part)), num_items=3)
        opt.step(model, acc)
        eager_opt.step(eager_model, eager)
        acc.zero()
        eager.zero()
    assert step.last.outcome == "replayed"
    for (name, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters(), strict=True):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)


def test_a_capture_turned_off_runs_every_forward_eagerly_and_says_so() -> None:
    model = mlp("float32")
    acc = Accumulator(model, steps=3)
    step = acc.capture(_loss_of(model), enabled=False)
    for part in range(3):
        loss = step(*_inputs(part))
        assert acc.forward_replay == "eager" and step.last.reason == "replay is off"
        acc.backward(loss, num_items=3)


def test_a_forward_not_captured_gives_its_backward_span_no_replay() -> None:
    model = mlp("float32")
    acc = Accumulator(model, steps=2, trace=True)
    for rows in (slice(0, 3), slice(3, 6)):
        _micro_batch(acc, model, rows)
        assert acc.forward_replay is None
    backward = [span for span in acc.trace.spans if span.name == "backward"]
    assert len(backward) == 2 and all("replay" not in span.args for span in backward)

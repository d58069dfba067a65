"""The trace of a window in the Trace Event Format: one recorder, the kernel view and the Chrome
view of the same records, every kernel inside its micro-batch's backward, named by its path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum import kernels
from minitorch_accum.accum import Accumulator
from minitorch_accum.observe import AccumulationTrace, KernelEvent
from minitorch_accum.observe.chrome_trace import chrome_trace, rank_trace_path
from minitorch_accum.observe.memory import array_tracking_available
from minitorch_accum.optim import SGD
from tests.accum.helpers import data, mlp, summed_loss
from tests.trace_events import check_trace_event_format, complete, inside

K = 3


def traced_window(fusion: str = "gemm", memory: str | None = "counter") -> tuple[Accumulator, AccumulationTrace]:
    model = mlp("float32", hidden=64)
    x, y = data(n=24)
    trace = AccumulationTrace(memory=memory)
    acc = Accumulator(model, steps=K, fusion=fusion, trace=trace)
    with trace.recording_memory():
        for i in range(K):
            with acc.micro_batch():
                acc.backward(summed_loss(model, x[i * 8:(i + 1) * 8], y[i * 8:(i + 1) * 8], "float32"), num_items=8)
        SGD(lr=0.1).step(model, acc)
        acc.zero()
    return acc, trace


def test_a_window_is_complete_events_in_microseconds_with_counters_and_names() -> None:
    acc, trace = traced_window()
    events = check_trace_event_format(chrome_trace([trace]))
    assert len(complete(events, "forward")) == len(complete(events, "backward")) == K
    assert [e["name"] for e in complete(events, cat="micro_batch") if e["name"].startswith("micro-batch")] == [
        f"micro-batch {i}" for i in range(K)]
    step, = complete(events, "ProfilerStep#0")
    assert step["args"] == {"window": 0, "micro_batches": K, "items": 8 * K, "k": K}
    close, = complete(events, "close")
    normalization, = complete(events, "normalization")
    assert inside(normalization, close) and inside(close, step)
    for micro in complete(events, cat="micro_batch"):
        assert inside(micro, step)
    # the forward of a micro-batch ends where its backward begins
    for forward, backward in zip(complete(events, "forward"), complete(events, "backward"), strict=True):
        assert backward["ts"] == pytest.approx(forward["ts"] + forward["dur"], abs=1.0)
    arena = [e for e in events if e["ph"] == "C" and e["name"] == "arena bytes"]
    assert [e["args"]["bytes"] for e in arena] == [acc.store.nbytes]
    alive = [e["args"]["bytes"] for e in events if e["ph"] == "C" and e["name"].startswith("array bytes alive")]
    assert min(alive) >= 0 and max(alive) > 0
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {"window", "micro-batches", "arena writes", "collectives"}


def test_every_kernel_runs_inside_the_backward_of_its_micro_batch_and_says_what_ran_it() -> None:
    _, trace = traced_window()
    events = chrome_trace([trace])["traceEvents"]
    backwards = complete(events, "backward")
    kernels_run = complete(events, cat="kernel")
    writes = [e for e in kernels_run if e["name"] != "finite_check"]
    assert len(writes) == K * 4  # two weights, two biases per micro-batch
    # the window's end reads the two GEMM-written weights (their factors are the larger read here),
    # after the last backward
    checks = [e for e in kernels_run if e["name"] == "finite_check"]
    assert sorted(e["args"]["param"] for e in checks) == ["0.weight", "2.weight"]
    assert all(e["ts"] >= backwards[-1]["ts"] + backwards[-1]["dur"] for e in checks)
    for write in writes:
        args = write["args"]
        assert inside(write, backwards[args["micro_batch"]]), write
        assert args["bytes"] > 0 and args["elements"] > 0
        assert args["GB/s"] == pytest.approx(args["bytes"] / (write["dur"] * 1e-6) / 1e9, rel=0.05, abs=1e-3)
        if write["name"].startswith("gemm-beta"):
            assert args["path"] == "blas" and args["beta"] == (0 if args["micro_batch"] == 0 else 1)
        else:
            assert args["path"] == "native" and write["name"] == ("copy_scale" if args["micro_batch"] == 0
                                                                   else "add_scale")


def test_the_fused_step_is_recorded_inside_its_window_as_one_launch_with_the_scale_it_folded_in() -> None:
    acc, trace = traced_window()
    (step,) = [e for e in trace.events if e.kernel == "multi_sgd_momentum_step"]
    sizes = {name: p.size for name, p in acc.model.named_parameters()}
    assert step.param == ", ".join(sizes) and step.elements == sum(sizes.values())
    assert step.scale == 1 / (K * 8)  # the window's 1/N items, which no pass applied
    assert not [e for e in trace.events if e.kernel == "scale"]
    assert step.micro_batch == -1 and step.bytes == kernels.bytes_moved(step.kernel, step.elements, 4, 4)
    events = chrome_trace([trace])["traceEvents"]
    (window,) = complete(events, "ProfilerStep#0")
    (launch,) = complete(events, cat="optimizer")
    assert launch["name"] == "multi_sgd_momentum_step" and launch["tid"] == window["tid"]
    assert inside(launch, window, slack_us=0.002)
    assert launch["args"]["grad_scale"] == 1 / (K * 8) and launch["args"]["path"] == "native"


@pytest.mark.skipif(not array_tracking_available(), reason="this NumPy has no data-memory handlers")
def test_the_bytes_alive_counter_is_the_bytes_of_the_arrays_made() -> None:
    trace = AccumulationTrace(memory="frames", name="known")
    with trace.recording_memory():
        first = np.empty(1000)  # 8,000 B
        second = np.empty((30, 50), dtype=np.float32)  # 6,000 B
        del first
        third = np.empty(2500)  # 20,000 B (np.ones would add its fill value's 8-byte temporaries)
    events = chrome_trace([trace])["traceEvents"]
    alive = [e["args"]["bytes"] for e in events if e["name"] == "known: array bytes alive (allocated while recording)"]
    assert alive == [0, 8000, 14000, 6000, 26000] and alive[-1] == second.nbytes + third.nbytes


@pytest.mark.skipif(not array_tracking_available(), reason="this NumPy has no data-memory handlers")
def test_the_bytes_alive_counter_of_a_window_follows_every_recorded_event() -> None:
    trace = AccumulationTrace(memory="frames")
    acc = Accumulator(mlp("float32", hidden=64), steps=K, trace=trace)
    x, y = data(n=24)
    with trace.recording_memory():
        for i in range(K):
            with acc.micro_batch():
                acc.backward(summed_loss(acc.model, x[i * 8:(i + 1) * 8], y[i * 8:(i + 1) * 8], "float32"),
                             num_items=8)
        optimizer = SGD(lr=0.1, momentum=0.9)
        optimizer.step(acc.model, acc)
    level, expected = 0, [0]
    for _, _, nbytes, _, _ in trace.memory.events:
        level += nbytes
        expected.append(level)
    counter = [e["args"]["bytes"] for e in chrome_trace([trace])["traceEvents"]
               if e["name"] == "array bytes alive (allocated while recording)"]
    assert counter == expected and max(counter) == trace.memory.peak > 0
    # what stays is what the step made: a momentum buffer per parameter
    assert counter[-1] == sum(slots["momentum_buffer"].nbytes for slots in optimizer.state.values())


@pytest.mark.parametrize("path", ["reference", "emulated"])
def test_the_path_of_each_kernel_is_the_one_that_ran(path: str) -> None:
    with kernels.use_path(path):
        _, trace = traced_window(fusion="leaf", memory=None)
    assert {e.path for e in trace.events} == {path}
    assert set(trace.paths()) == {path}
    assert path in trace.paths_line()


def test_the_kernel_view_and_the_chrome_view_are_the_same_records(tmp_path: Path) -> None:
    _, trace = traced_window()
    trace.save_json(tmp_path / "events.json")
    saved = json.loads((tmp_path / "events.json").read_text())
    events = chrome_trace([trace])["traceEvents"]
    writes = complete(events, cat="kernel") + complete(events, cat="optimizer")  # the step's launch comes last
    assert len(saved["events"]) == len(writes) == len(trace)
    for record, event in zip(saved["events"], writes, strict=True):
        assert (record["kernel"], record["param"], record["path"]) == (event["name"], event["args"]["param"],
                                                                       event["args"]["path"])
        assert event["ts"] == pytest.approx(record["start"] * 1e6, abs=1e-3)
        assert event["dur"] == pytest.approx(record["seconds"] * 1e6, abs=1e-3)
    assert saved["totals"]["gemm-beta1"]["calls"] == 2 * (K - 1)


def test_an_accumulator_given_a_path_writes_the_trace_at_every_window_end(tmp_path: Path) -> None:
    model = mlp("float32")
    x, y = data()
    target = tmp_path / "run.trace.json"
    acc = Accumulator(model, steps=2, trace=target)
    for window in range(2):
        for i in range(2):
            acc.backward(summed_loss(model, x[i * 4:(i + 1) * 4], y[i * 4:(i + 1) * 4], "float32"), num_items=4)
        acc.zero()
        events = check_trace_event_format(json.loads(target.read_text()))
        assert [e["name"] for e in complete(events, cat="window") if e["name"].startswith("ProfilerStep")] == [
            f"ProfilerStep#{w}" for w in range(window + 1)]
    with pytest.raises(TypeError, match="trace must be"):
        Accumulator(model, steps=2, trace=3.5)


def test_collectives_reported_after_the_reduction_are_laid_end_to_end() -> None:
    trace = AccumulationTrace()
    started = trace.origin + 1.0
    # what a reducer reports once it is done: the facts first, then each bucket with its seconds
    trace.record(KernelEvent(0, -1, "(window facts, wait)", "allreduce", 0, 0, 0.001, False))
    for index in range(3):
        trace.record(KernelEvent(0, -1, f"bucket {index}", "allreduce", 100, 400, 0.002 * (index + 1), False))
    trace.lay_out_collectives(0, started)
    starts = [(e.param, e.start) for e in trace.events]
    assert [p for p, _ in starts] == ["bucket 0", "bucket 1", "bucket 2", "(window facts, wait)"]
    assert [s for _, s in starts] == pytest.approx([1.0, 1.002, 1.006, 1.012])


def test_each_rank_has_its_file_and_its_place_in_the_job() -> None:
    assert rank_trace_path("runs/t.json", 0, 1) == Path("runs/t.json")
    assert rank_trace_path("runs/t.json", 1, 2) == Path("runs/t.rank1.json")
    trace = AccumulationTrace(rank=1, world_size=2)
    trace.add_span("close", "window", trace.origin, trace.origin + 1e-3)
    record = chrome_trace([trace], base=trace.wall_origin - 2.0)
    assert record["distributedInfo"]["rank"] == 1 and record["distributedInfo"]["world_size"] == 2
    span, = complete(record["traceEvents"], "close")
    assert span["pid"] == 1 and span["ts"] == pytest.approx(2e6) and span["dur"] == pytest.approx(1e3)
    assert np.isclose(record["baseTimeNanoseconds"], (trace.wall_origin - 2.0) * 1e9, rtol=0, atol=1e3)

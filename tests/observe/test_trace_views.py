"""The two views of a trace, written out whole from hand-made records: the Trace Event Format
object (every metadata event, lane, category, argument and rounding the viewers read) and the
kernel view (totals, the table, the JSON, the paths line). Built without a model, so that
every number is known."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from minitorch_accum.observe import AccumulationTrace, KernelEvent
from minitorch_accum.observe.chrome_trace import chrome_trace, rank_trace_path, write_chrome_trace
from minitorch_accum.observe.trace import trace_span
from minitorch_accum.observe.trace_events import Span, kernel_path_of


def _recording(name: str, wall_origin: float, rank: int = 0, world_size: int = 1) -> AccumulationTrace:
    trace = AccumulationTrace(name=name, rank=rank, world_size=world_size)
    trace.wall_origin = wall_origin
    return trace


def _first() -> AccumulationTrace:
    trace = _recording("8 x 4", 1000.0)
    trace.spans += [Span("ProfilerStep#0", "window", 0.0, 0.01, {"window": 0}),
                    Span("backward", "micro-batches", 0.001, 0.002, {"micro_batch": 0}),
                    Span("a lane of its own", "elsewhere", 0.004, 0.0001)]
    trace.events += [
        KernelEvent(0, 0, "w", "gemm-beta0", 12, 48, 1e-6, False, 0.00123456789, "blas"),
        KernelEvent(0, 1, "b", "add_scale", 4, 48, 2e-6, True, 0.002, "native"),
        KernelEvent(0, -1, "bucket 0 [0:16]", "allreduce", 16, 64, 3e-6, False, 0.003, "mpi"),
        KernelEvent(0, -1, "w, b", "multi_sgd_momentum_step", 16, 160, 7e-7, False, 0.009, "native", scale=0.25),
    ]
    trace.counters.append(("arena bytes", 0.0005, 64))
    trace.memory = SimpleNamespace(samples=[(0.0015, 4096)])
    return trace


def _second() -> AccumulationTrace:
    trace = _recording("", 1000.5)
    trace.spans.append(Span("ProfilerStep#0", "window", 0.0, 0.02))
    trace.events.append(KernelEvent(0, 0, "w", "add_scale", 12, 144, 3e-6, False, 0.001, "native"))
    trace.events.append(KernelEvent(0, 0, "w", "copy_scale", 12, 96, 3e-6, False, 0.002, "native"))
    return trace


def _meta(name: str, pid: int, tid: int, args: dict) -> dict:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


def _lanes(pid: int, first_tid: int, prefix: str) -> list[dict]:
    out = []
    for i, lane in enumerate(("window", "micro-batches", "arena writes", "collectives")):
        out += [_meta("thread_name", pid, first_tid + i, {"name": prefix + lane}),
                _meta("thread_sort_index", pid, first_tid + i, {"sort_index": first_tid + i})]
    return out


def test_the_trace_event_format_object_of_two_recordings_whole() -> None:
    got = chrome_trace([_first(), _second()])
    expected_events = [
        _meta("process_name", 0, 0, {"name": "minitorch_accum"}),
        _meta("process_sort_index", 0, 0, {"sort_index": 0}),
        *_lanes(0, 1, "8 x 4: "),
        {"name": "ProfilerStep#0", "cat": "window", "ph": "X", "ts": 0.0, "dur": 10000.0, "pid": 0, "tid": 1,
         "args": {"window": 0}},
        {"name": "backward", "cat": "micro_batch", "ph": "X", "ts": 1000.0, "dur": 2000.0, "pid": 0, "tid": 2,
         "args": {"micro_batch": 0}},
        # a lane the view does not know goes on the window's track, its category its own name
        {"name": "a lane of its own", "cat": "elsewhere", "ph": "X", "ts": 4000.0, "dur": 100.0, "pid": 0, "tid": 1,
         "args": {}},
        {"name": "gemm-beta0", "cat": "kernel", "ph": "X", "ts": 1234.568, "dur": 1.0, "pid": 0, "tid": 3,
         "args": {"param": "w", "path": "blas", "elements": 12, "bytes": 48, "GB/s": 0.048, "window": 0,
                  "micro_batch": 0, "beta": 0,
                  "fused": "the GEMM wrote the arena view itself: no gradient array, no accumulation pass"}},
        {"name": "add_scale", "cat": "kernel", "ph": "X", "ts": 2000.0, "dur": 2.0, "pid": 0, "tid": 3,
         "args": {"param": "b", "path": "native", "elements": 4, "bytes": 48, "GB/s": 0.024, "window": 0,
                  "micro_batch": 1, "materialized": True}},
        {"name": "allreduce", "cat": "collective", "ph": "X", "ts": 3000.0, "dur": 3.0, "pid": 0, "tid": 4,
         "args": {"param": "bucket 0 [0:16]", "path": "mpi", "elements": 16, "bytes": 64, "GB/s": 0.021,
                  "window": 0}},
        {"name": "multi_sgd_momentum_step", "cat": "optimizer", "ph": "X", "ts": 9000.0, "dur": 0.7, "pid": 0, "tid": 1,
         "args": {"param": "w, b", "path": "native", "elements": 16, "bytes": 160, "GB/s": 0.229, "window": 0,
                  "grad_scale": 0.25}},
        {"name": "8 x 4: arena bytes", "cat": "memory", "ph": "C", "ts": 500.0, "pid": 0, "tid": 0,
         "args": {"bytes": 64}},
        {"name": "8 x 4: array bytes alive (allocated while recording)", "cat": "memory", "ph": "C", "ts": 1500.0,
         "pid": 0, "tid": 0, "args": {"bytes": 4096}},
        # the second recording: its lanes from tid 11, half a second later, its window numbered on
        *_lanes(0, 11, ""),
        {"name": "ProfilerStep#1", "cat": "window", "ph": "X", "ts": 500000.0, "dur": 20000.0, "pid": 0, "tid": 11,
         "args": {}},
        {"name": "add_scale", "cat": "kernel", "ph": "X", "ts": 501000.0, "dur": 3.0, "pid": 0, "tid": 13,
         "args": {"param": "w", "path": "native", "elements": 12, "bytes": 144, "GB/s": 0.048, "window": 0,
                  "micro_batch": 0}},
        {"name": "copy_scale", "cat": "kernel", "ph": "X", "ts": 502000.0, "dur": 3.0, "pid": 0, "tid": 13,
         "args": {"param": "w", "path": "native", "elements": 12, "bytes": 96, "GB/s": 0.032, "window": 0,
                  "micro_batch": 0}},
    ]
    assert got == {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1000 * 10**9,
        "distributedInfo": {"rank": 0, "world_size": 1, "backend": "minitorch_accum"},
        "otherData": {"producer": "minitorch_accum",
                      "kernel_paths": {"blas": ["gemm-beta0"],
                                       "native": ["add_scale", "multi_sgd_momentum_step", "copy_scale"],
                                       "mpi": ["allreduce"]},
                      "recordings": ["8 x 4", ""]},
        "traceEvents": expected_events,
    }


def test_a_rank_of_a_job_names_its_process_and_sorts_it_by_rank() -> None:
    got = chrome_trace([_recording("", 2000.25, rank=1, world_size=2)], base=2000.0)
    assert got["traceEvents"][:2] == [_meta("process_name", 1, 0, {"name": "rank 1"}),
                                      _meta("process_sort_index", 1, 0, {"sort_index": 1})]
    assert got["distributedInfo"] == {"rank": 1, "world_size": 2, "backend": "minitorch_accum"}
    assert got["baseTimeNanoseconds"] == 2000 * 10**9
    alone = AccumulationTrace()  # one process: rank 0 of 1
    assert (alone.rank, alone.world_size) == (0, 1)
    assert chrome_trace([alone])["traceEvents"][0]["args"] == {"name": "minitorch_accum"}
    with pytest.raises(ValueError, match=r"^chrome_trace: no trace given$"):
        chrome_trace([])


def test_the_windows_of_each_later_recording_are_numbered_after_all_before_it() -> None:
    got = chrome_trace([_first(), _second(), _second()])
    steps = [e["name"] for e in got["traceEvents"] if e["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]


def test_the_file_is_written_where_asked_its_directories_made_its_base_kept(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "run.json"
    assert write_chrome_trace([_second()], target, base=1000.0) == target
    written = json.loads(target.read_text())
    assert written == chrome_trace([_second()], base=1000.0)
    assert written["traceEvents"][10]["ts"] == 500000.0  # from the base given, not the recording's origin


@pytest.mark.parametrize(("path", "rank", "world_size", "expected"), [
    ("run.trace.json", 1, 2, "run.trace.rank1.json"),
    ("run", 0, 2, "run.rank0.json"),  # no suffix: a JSON one, which HTA reads
    ("run.trace.json", 0, 1, "run.trace.json"),
])
def test_each_rank_writes_its_own_file(path: str, rank: int, world_size: int, expected: str) -> None:
    assert rank_trace_path(Path("out") / path, rank, world_size) == Path("out") / expected


@pytest.mark.parametrize(("kernel", "device", "communicator", "path"), [
    ("allreduce", "cpu", "mpi", "mpi"), ("reduce_scatter", "cuda", "", "collective"),
    ("gemm-beta1", "cpu", "", "blas"), ("gemm-beta0", "cuda", "", "cublas"),
    ("scale", "cpu", "", "numpy"), ("gemm-fallback", "cuda", "", "cupy"), ("container-add", "cpu", "", "numpy"),
    ("add_scale", "cuda", "", "cupy"),
])
def test_each_kernel_is_said_to_run_where_it_ran(kernel: str, device: str, communicator: str, path: str) -> None:
    assert kernel_path_of(kernel, device, communicator) == path


def test_a_collective_without_a_communicator_named_runs_on_the_collective_path() -> None:
    assert kernel_path_of("allreduce") == "collective"


def test_collectives_are_laid_end_to_end_buckets_first_whatever_their_size() -> None:
    trace = AccumulationTrace()
    trace.events += [KernelEvent(0, -1, "(window facts, wait)", "allreduce", 0, 0, 0.5, False),
                     KernelEvent(0, -1, "bucket 0 [0:1]", "allreduce", 1, 4, 0.25, False),
                     KernelEvent(0, -1, "bucket 1 [1:9]", "allreduce", 8, 32, 0.125, False)]
    trace.lay_out_collectives(0, trace.origin + 1.0)
    assert [(e.param, e.start) for e in trace.events] == [
        ("bucket 0 [0:1]", 1.0), ("bucket 1 [1:9]", 1.25), ("(window facts, wait)", 1.375)]

def test_the_kernel_view_sums_lists_and_names_every_event() -> None:
    trace = _first()
    trace.events.append(KernelEvent(1, 0, "b", "add_scale", 6, 72, 0.25, False, 0.02, "native"))
    totals = trace.totals()
    assert totals["add_scale"] == {"calls": 2, "elements": 10, "bytes": 120, "seconds": 0.25 + 2e-6}
    assert totals["allreduce"] == {"calls": 1, "elements": 16, "bytes": 64, "seconds": 3e-6}
    assert json.loads(trace.to_json()) == {"events": trace.to_dicts(), "totals": trace.totals()}
    assert trace.to_json().startswith('{\n  "events": [\n    {\n      "window": 0,')  # two spaces a level
    assert trace.paths_line() == ("blas (gemm-beta0), native (add_scale, multi_sgd_momentum_step), mpi (allreduce); "
                                  "MTA_KERNELS=native|emulated|reference chooses the CPU path of the library's kernels")
    assert AccumulationTrace().paths_line().startswith("nothing yet; ")
    assert [e.kernel for e in trace.for_param("b")] == ["add_scale", "add_scale"]
    assert trace.table().splitlines()[-1].split() == ["1", "0", "b", "add_scale", "native", "6", "72", "0.00",
                                                      "250000.0"]
    lines = trace.table(limit=3).splitlines()
    assert lines[0] == "window  micro  param            kernel      path    elements  bytes  GB/s  us "
    assert set(lines[1]) == {"-", " "}
    assert [line.split() for line in lines[2:]] == [
        ["0", "0", "w", "gemm-beta0", "blas", "12", "48", "0.05", "1.0"],
        ["0", "1", "b", "add_scale", "native", "4", "48", "0.02", "2.0"],
        ["0", "-", "bucket", "0", "[0:16]", "allreduce", "mpi", "16", "64", "0.02", "3.0"],
    ]
    # columns as wide as their widest cell, two spaces apart
    widths = [len(cell) for cell in lines[1].split("  ")]
    assert widths == [6, 5, 15, 10, 6, 8, 5, 4, 3]
    assert lines[4].startswith("0       -      bucket 0 [0:16]  allreduce")
    empty = "------  -----  -----  ------  ----  --------  -----  ----  --"  # the header's own widths
    assert AccumulationTrace().table().splitlines()[1] == empty


def test_a_counter_is_taken_at_the_instant_given_and_a_span_only_when_tracing() -> None:
    trace = AccumulationTrace()
    trace.count("arena bytes", 64, at=trace.origin + 0.5)
    assert trace.counters == [("arena bytes", 0.5, 64)]
    with trace_span(trace, "optimizer step", "window", window=2):
        pass
    assert [(s.name, s.lane, s.args) for s in trace.spans] == [("optimizer step", "window", {"window": 2})]
    with trace_span(None, "optimizer step", "window"):
        pass


def test_an_array_made_in_a_span_is_said_to_be_made_there_and_nowhere_else() -> None:
    trace = AccumulationTrace(memory="frames")
    with trace.recording_memory(), trace.span("close", "window"):
        made = np.empty(10_000)  # 80 kB: above NumPy's small-block cache
    assert made.nbytes and {event[-1] for event in trace.memory.events if event[2] > 0} == {"close"}

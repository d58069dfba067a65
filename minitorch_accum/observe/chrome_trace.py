"""A trace of accumulation in the Trace Event Format: open it in ui.perfetto.dev or chrome://tracing.

The JSON object format (``traceEvents`` plus metadata): ``ph: "X"`` complete events with
``ts`` and ``dur`` in microseconds, ``ph: "C"`` counters, ``ph: "M"`` names. One ``pid`` per
rank; one ``tid`` per lane of ``observe.trace_events.LANES`` (the window, with the fused optimizer
step's kernel inside its span; its micro-batches' forward and backward; the kernels writing the
arena; the collectives), the lanes of a second recording in the same file (explain's big batch)
on tids of their own. Each window is a ``ProfilerStep#N``
span, the name PyTorch's profiler gives an optimizer step, so Holistic Trace Analysis finds
the iterations; ``distributedInfo`` names the rank (one file per rank under mpiexec).

Times are wall-clock microseconds from ``base`` (default: the first trace's origin), so the
files of the ranks line up; ``baseTimeNanoseconds`` says where that is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from minitorch_accum.observe.trace_events import COLLECTIVES, LANES, OPTIMIZER_STEPS, KernelEvent, Span

__all__ = ["chrome_trace", "rank_trace_path", "write_chrome_trace"]

#: each recording's lanes take tids from ``1 + LANE_BLOCK * its index``
LANE_BLOCK = 10
#: the name of a window's span: PyTorch's profiler calls an optimizer step ``ProfilerStep#N``
STEP_PREFIX = "ProfilerStep#"
_CATEGORY = {"window": "window", "micro-batches": "micro_batch", "arena writes": "kernel",
             "collectives": "collective"}


class Recording(Protocol):
    """What this view reads of a trace (an ``AccumulationTrace``, which saves itself through it)."""

    name: str
    rank: int
    world_size: int
    wall_origin: float
    events: list[KernelEvent]
    spans: list[Span]
    counters: list[tuple[str, float, int]]
    memory: Any  # an AllocationRecording (its ``samples``) or None

    def paths(self) -> dict[str, list[str]]: ...


def rank_trace_path(path: str | os.PathLike, rank: int, world_size: int) -> Path:
    """The file of ``rank``: ``path`` itself in one process, ``run.trace.rank1.json`` for rank 1
    of ``run.trace.json`` under mpiexec (HTA reads a directory of such files)."""
    target = Path(path)
    if world_size <= 1:
        return target
    suffix = target.suffix or ".json"
    return target.with_name(f"{target.name.removesuffix(target.suffix)}.rank{rank}{suffix}")


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _kernel_lane(event: KernelEvent) -> str:
    if event.kernel in OPTIMIZER_STEPS:
        return "window"  # inside its "optimizer step" span: it reads the arena, it writes the parameters
    return "collectives" if event.kernel in COLLECTIVES else "arena writes"


def _kernel_category(event: KernelEvent) -> str:
    return "optimizer" if event.kernel in OPTIMIZER_STEPS else _CATEGORY[_kernel_lane(event)]


def _kernel_args(event: KernelEvent) -> dict[str, Any]:
    args: dict[str, Any] = {"param": event.param, "path": event.path, "elements": event.elements,
                            "bytes": event.bytes, "GB/s": round(event.gb_per_s, 3), "window": event.window}
    if event.micro_batch >= 0:
        args["micro_batch"] = event.micro_batch
    if event.kernel.startswith("gemm-beta"):
        args["beta"] = int(event.kernel[-1])  # beta 0: the window's first write; 1: added in place
        args["fused"] = "the GEMM wrote the arena view itself: no gradient array, no accumulation pass"
    elif event.materialized:
        args["materialized"] = True  # the contribution was an array of its own before it was added
    if event.scale is not None:
        args["grad_scale"] = event.scale  # folded into the step: no pass divided the window's sums
    return args


def _span_name(name: str, steps_before: int) -> str:
    # a second recording's windows continue the numbering: one iteration per ProfilerStep for HTA
    if steps_before and name.startswith(STEP_PREFIX):
        return f"{STEP_PREFIX}{int(name.removeprefix(STEP_PREFIX)) + steps_before}"
    return name


def _events_of(trace: Recording, pid: int, index: int, shift: float, steps_before: int) -> list[dict[str, Any]]:
    tids = {lane: 1 + LANE_BLOCK * index + i for i, lane in enumerate(LANES)}
    prefix = f"{trace.name}: " if trace.name else ""
    out: list[dict[str, Any]] = []
    for lane in LANES:
        out.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": tids[lane],
                    "args": {"name": prefix + lane}})
        out.append({"name": "thread_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": tids[lane],
                    "args": {"sort_index": tids[lane]}})
    for span in trace.spans:
        out.append({"name": _span_name(span.name, steps_before), "cat": _CATEGORY.get(span.lane, span.lane), "ph": "X",
                    "ts": _us(shift + span.start), "dur": _us(span.seconds), "pid": pid,
                    "tid": tids.get(span.lane, tids["window"]), "args": dict(span.args)})
    for event in trace.events:
        lane = _kernel_lane(event)
        out.append({"name": event.kernel, "cat": _kernel_category(event), "ph": "X", "ts": _us(shift + event.start),
                    "dur": _us(event.seconds), "pid": pid, "tid": tids[lane], "args": _kernel_args(event)})
    for track, seconds, nbytes in trace.counters:
        out.append({"name": prefix + track, "cat": "memory", "ph": "C", "ts": _us(shift + seconds), "pid": pid,
                    "tid": 0, "args": {"bytes": nbytes}})
    if trace.memory is not None:
        track = prefix + "array bytes alive (allocated while recording)"
        for seconds, nbytes in trace.memory.samples:
            out.append({"name": track, "cat": "memory", "ph": "C", "ts": _us(shift + seconds), "pid": pid,
                        "tid": 0, "args": {"bytes": nbytes}})
    return out


def chrome_trace(traces: Sequence[Recording], base: float | None = None) -> dict[str, Any]:
    """The Trace Event Format object of one rank's ``traces`` (their rank and world size are the
    first one's); ``base`` is the wall-clock second of ts = 0."""
    if not traces:
        raise ValueError("chrome_trace: no trace given")
    first = traces[0]
    base = first.wall_origin if base is None else base
    pid = first.rank
    label = f"rank {pid}" if first.world_size > 1 else "minitorch_accum"
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": label}},
        {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    paths: dict[str, list[str]] = {}
    steps = 0
    for index, trace in enumerate(traces):
        events += _events_of(trace, pid, index, trace.wall_origin - base, steps)
        steps += sum(span.name.startswith(STEP_PREFIX) for span in trace.spans)
        for path, kernels in trace.paths().items():
            paths.setdefault(path, []).extend(k for k in kernels if k not in paths[path])
    return {
        "schemaVersion": 1,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": int(base * 1e9),
        "distributedInfo": {"rank": first.rank, "world_size": first.world_size, "backend": "minitorch_accum"},
        "otherData": {"producer": "minitorch_accum", "kernel_paths": paths,
                      "recordings": [t.name for t in traces]},
        "traceEvents": events,
    }


def write_chrome_trace(traces: Sequence[Recording], path: str | os.PathLike,
                       base: float | None = None) -> Path:
    """Write ``chrome_trace(traces)`` to ``path`` (a ``.json`` name: HTA reads no other)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(chrome_trace(traces, base)))
    return target

"""A record, for study, of what happened to every gradient and when: which kernel ran on which
parameter, on which path, how many elements and bytes it moved and how long it took, in the
spans of the window it belongs to (micro-batches' forward and backward, the close, the step).

    acc = Accumulator(model, steps=4, trace=True)
    ...
    print(acc.trace.table())
    acc.trace.save_json("trace.json")            # {"events", "totals"}: the kernels
    acc.trace.save_chrome("trace.perfetto.json")  # Trace Event Format: open in ui.perfetto.dev

One recorder, several views: ``events`` (the kernels, with ``totals`` and ``table``), the Chrome
trace of ``observe/chrome_trace.py`` and, with ``memory=``, the array allocations of
``observe/allocation_recording.py`` (a counter track, PyTorch's memory snapshot, the explain figure).
What it holds (``KernelEvent``, ``Span``, the lanes) is in ``observe/trace_events.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from minitorch_accum.observe.allocation_recording import AllocationRecording
from minitorch_accum.observe.chrome_trace import write_chrome_trace
from minitorch_accum.observe.trace_events import KernelEvent, Span

__all__ = ["AccumulationTrace", "trace_span"]


class AccumulationTrace:
    """Kernel events and spans in order; printable as a table, exportable as JSON and as a trace.

    Args:
        memory: also record the array allocations while ``recording_memory()`` is open:
            ``"counter"`` keeps the bytes alive over time (a counter track), ``"frames"`` every
            allocation with the Python frames that made it (PyTorch's memory snapshot, the figure).
        name: what the trace shows (explain records ``8 x 32`` beside ``1 x 256``).
        rank, world_size: the process's place in a data-parallel job (one trace file per rank).
    """

    def __init__(self, memory: str | None = None, name: str = "", rank: int = 0, world_size: int = 1) -> None:
        self.events: list[KernelEvent] = []
        self.spans: list[Span] = []
        self.counters: list[tuple[str, float, int]] = []  # (track, seconds from origin, bytes)
        self.name = name
        self.rank, self.world_size = int(rank), int(world_size)
        self.origin = time.perf_counter()
        self.wall_origin = time.time()  # the same instant on the wall clock, which the ranks share
        self.memory = None if memory is None else AllocationRecording(self.origin, keep=memory)
        self._context: list[str] = []
        self._phase = ""

    # ------------------------------------------------------------------ recording
    def clock(self, at: float | None = None) -> float:
        """Seconds from the origin of the perf_counter instant ``at`` (default: now)."""
        return (time.perf_counter() if at is None else at) - self.origin

    def record(self, event: KernelEvent) -> None:
        self.events.append(event)

    def add_span(self, name: str, lane: str, started: float, ended: float | None = None, **args: Any) -> Span:
        """A span from the perf_counter instant ``started`` to ``ended`` (default: now)."""
        ended = time.perf_counter() if ended is None else ended
        span = Span(name, lane, self.clock(started), max(0.0, ended - started), args)
        self.spans.append(span)
        return span

    @contextlib.contextmanager
    def span(self, name: str, lane: str, started: float | None = None, **args: Any) -> Iterator[dict[str, Any]]:
        """Record the block as a span (from the perf_counter instant ``started``, default: now);
        allocations inside it are attributed to it. The block gets the span's ``args``, to add what
        it learns (how a forward ran)."""
        started = time.perf_counter() if started is None else started
        self._context.append(name)
        self._name_context()
        try:
            yield args
        finally:
            self._context.pop()
            self._name_context()
            self.add_span(name, lane, started, **args)

    def set_phase(self, phase: str) -> None:
        """Name what runs now inside the innermost span without a span of its own (the forward
        of ``acc.micro_batch()``, known to be one only when its backward begins)."""
        self._phase = phase
        self._name_context()

    def _name_context(self) -> None:
        if self.memory is not None:
            self.memory.context = " / ".join([*self._context, *([self._phase] if self._phase else [])])

    def count(self, track: str, nbytes: int, at: float | None = None) -> None:
        """One value of a counter track (the arena's bytes) at the perf_counter instant ``at``."""
        self.counters.append((track, self.clock(at), int(nbytes)))

    @contextlib.contextmanager
    def recording_memory(self) -> Iterator[None]:
        """Record array allocations and frees inside the block (when made with ``memory=``)."""
        if self.memory is None:
            yield
            return
        with self.memory:
            yield

    def lay_out_collectives(self, first: int, started: float) -> None:
        """Place the collectives recorded since event number ``first`` end to end from the
        perf_counter instant ``started``, the window's facts last: the reducer reports each
        bucket's bytes and seconds after the reduction, not when each call began."""
        recorded = self.events[first:]
        buckets = [e for e in recorded if e.elements > 0]
        facts = [e for e in recorded if e.elements == 0]
        at = self.clock(started)
        placed = []
        for event in [*buckets, *facts]:
            placed.append(replace(event, start=at))
            at += event.seconds
        self.events[first:] = placed

    def clear(self) -> None:
        self.events.clear()
        self.spans.clear()
        self.counters.clear()

    # ---------------------------------------------------------------- the kernel view
    def for_param(self, name: str) -> list[KernelEvent]:
        return [e for e in self.events if e.param == name]

    def kernels_used(self) -> set[str]:
        return {e.kernel for e in self.events}

    def paths(self) -> dict[str, list[str]]:
        """Which implementation ran which kernels: path -> kernel names, in order of first use."""
        out: dict[str, list[str]] = {}
        for e in self.events:
            kernels = out.setdefault(e.path, [])
            if e.kernel not in kernels:
                kernels.append(e.kernel)
        return out

    def paths_line(self) -> str:
        """``native (copy_scale, add_scale), blas (gemm-beta0, gemm-beta1)``: what a header prints,
        with where the CPU path is chosen."""
        used = ", ".join(f"{path} ({', '.join(kernels)})" for path, kernels in self.paths().items()) or "nothing yet"
        return f"{used}; MTA_KERNELS=native|emulated|reference chooses the CPU path of the library's kernels"

    def totals(self) -> dict[str, dict[str, float]]:
        """Per kernel: calls, elements, bytes and seconds summed."""
        out: dict[str, dict[str, float]] = {}
        for e in self.events:
            row = out.setdefault(e.kernel, {"calls": 0, "elements": 0, "bytes": 0, "seconds": 0.0})
            row["calls"] += 1
            row["elements"] += e.elements
            row["bytes"] += e.bytes
            row["seconds"] += e.seconds
        return out

    def to_dicts(self) -> list[dict[str, Any]]:
        return [asdict(e) for e in self.events]

    def to_json(self) -> str:
        return json.dumps({"events": self.to_dicts(), "totals": self.totals()}, indent=2)

    def save_json(self, path: str | os.PathLike) -> None:
        Path(path).write_text(self.to_json())

    def save_chrome(self, path: str | os.PathLike) -> Path:
        """Write the Trace Event Format view (ui.perfetto.dev, chrome://tracing, HTA)."""
        return write_chrome_trace([self], path)

    def table(self, limit: int | None = None) -> str:
        """A plain-text table, one row per event."""
        header = ("window", "micro", "param", "kernel", "path", "elements", "bytes", "GB/s", "us")
        rows = []
        for e in self.events[:limit]:
            micro = "-" if e.micro_batch < 0 else str(e.micro_batch)
            rows.append((str(e.window), micro, e.param, e.kernel, e.path, str(e.elements), str(e.bytes),
                         f"{e.gb_per_s:.2f}", f"{e.seconds * 1e6:.1f}"))
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.events)


def trace_span(trace: AccumulationTrace | None, name: str, lane: str, **args: Any) -> contextlib.AbstractContextManager:
    """``trace.span(...)``, or nothing at all when there is no trace (the Learner's spans)."""
    return contextlib.nullcontext() if trace is None else trace.span(name, lane, **args)

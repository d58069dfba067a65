"""A record, for study, of what happened to every gradient: which kernel ran on which
parameter, how many elements and bytes it moved, and how long it took.

    acc = Accumulator(model, steps=4, trace=True)
    ...
    print(acc.trace.table())
    acc.trace.save_json("trace.json")
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from minitorch_accum.kernels import bytes_moved

__all__ = ["AccumulationTrace", "KernelEvent", "KernelRecorder", "record_window_pass"]


@dataclass(frozen=True)
class KernelEvent:
    """One write of a gradient contribution into the arena (or one window-level pass)."""

    window: int
    micro_batch: int  # 0-based within the window; -1 for window-level passes
    param: str
    kernel: str
    elements: int
    bytes: int
    seconds: float
    materialized: bool  # True when the contribution existed as its own array before being added


class KernelRecorder(Protocol):
    """What a gradient store calls for every kernel that writes or reads the window's gradients;
    the Accumulator adds the window and micro-batch numbers."""

    def __call__(self, param: str, kernel: str, elements: int, nbytes: int, seconds: float, *,
                 materialized: bool, window_pass: bool) -> None: ...


def record_window_pass(recorder: KernelRecorder, kernel: str, arrays: list[tuple[str, Any]], seconds: float) -> None:
    """One pass over the window's gradients, recorded per parameter with its share of the time."""
    total = sum(a.size for _, a in arrays) or 1
    for name, array in arrays:
        size = array.dtype.itemsize
        recorder(name, kernel, array.size, bytes_moved(kernel, array.size, size, size), seconds * array.size / total,
                 materialized=False, window_pass=True)


class AccumulationTrace:
    """Kernel events in order; printable as a table and exportable as JSON."""

    def __init__(self) -> None:
        self.events: list[KernelEvent] = []

    def record(self, event: KernelEvent) -> None:
        self.events.append(event)

    def clear(self) -> None:
        self.events.clear()

    def for_param(self, name: str) -> list[KernelEvent]:
        return [e for e in self.events if e.param == name]

    def kernels_used(self) -> set[str]:
        return {e.kernel for e in self.events}

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

    def table(self, limit: int | None = None) -> str:
        """A plain-text table, one row per event."""
        header = ("window", "micro", "param", "kernel", "elements", "bytes", "GB/s", "us")
        rows = []
        for e in self.events[:limit]:
            rate = e.bytes / e.seconds / 1e9 if e.seconds > 0 else 0.0
            micro = "-" if e.micro_batch < 0 else str(e.micro_batch)
            rows.append((str(e.window), micro, e.param, e.kernel, str(e.elements), str(e.bytes),
                         f"{rate:.2f}", f"{e.seconds * 1e6:.1f}"))
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join(lines)

    def __len__(self) -> int:
        return len(self.events)

"""Array allocations as a PyTorch memory snapshot: drag the file into pytorch.org/memory_viz.

The format is the one ``torch.cuda.memory._snapshot()`` returns and ``torch.cuda._memory_viz``
reads (``segments``: the blocks alive at the end; ``device_traces``: one list of events per
device, ``alloc`` / ``free_requested`` / ``free_completed`` with address, size, stream and the
Python frames that made the block). PyTorch's caching allocator carves blocks out of segments
it got from cudaMalloc; NumPy asks malloc for every array, so here each array is its own
segment (``segment_alloc`` before its ``alloc``, ``segment_free`` after its free), which keeps
every view of the viewer consistent. On a GPU the blocks are CuPy pool allocations.

Several recordings go one after the other in one snapshot (explain: a window of 8 x 32, then
one batch of 256): each recording's persistent blocks (arena, parameters) are allocated at its
start, and what it still holds at its end is freed there, except for the last recording, whose
blocks are the snapshot's segments.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minitorch_accum.observe.allocation_recording import AllocationRecording, Frame

__all__ = ["memory_snapshot", "save_memory_snapshot"]

# protocol 4: the viewer's own unpickler (MemoryViz.js) reads protocols 2 to 4 only
_PICKLE_PROTOCOL = 4


def _frames(frames: Sequence[Frame], context: str, label: str) -> list[dict[str, Any]]:
    """PyTorch's frames, innermost first; the span the block was made in comes last, as the
    outermost frame, so the viewer names the micro-batch and the phase."""
    out = [{"filename": filename, "line": int(line), "name": name} for filename, line, name in frames]
    where = " / ".join(part for part in (label, context) if part)
    if where:
        out.append({"filename": "minitorch_accum", "line": 0, "name": where})
    return out


def _event(action: str, address: int, size: int, frames: list[dict[str, Any]], time_us: int) -> dict[str, Any]:
    return {"action": action, "addr": address, "size": size, "stream": 0, "frames": frames, "time_us": time_us}


def _allocate(trace: list[dict[str, Any]], address: int, size: int, frames: list[dict[str, Any]],
              time_us: int) -> None:
    trace.append(_event("segment_alloc", address, size, frames, time_us))
    trace.append(_event("alloc", address, size, frames, time_us))


def _free(trace: list[dict[str, Any]], address: int, size: int, frames: list[dict[str, Any]], time_us: int) -> None:
    for action in ("free_requested", "free_completed", "segment_free"):
        trace.append(_event(action, address, size, frames, time_us))


def _segment(address: int, size: int, frames: list[dict[str, Any]]) -> dict[str, Any]:
    block = {"address": address, "size": size, "requested_size": size, "state": "active_allocated",
             "frames": frames}
    return {"device": 0, "address": address, "total_size": size, "allocated_size": size, "active_size": size,
            "requested_size": size, "stream": 0, "segment_type": "large" if size > 1 << 20 else "small",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames, "blocks": [block]}


def memory_snapshot(recordings: Sequence[AllocationRecording], labels: Sequence[str] = (),
                    wall_origins: Sequence[float] = ()) -> dict[str, Any]:
    """The snapshot of ``recordings`` (``"frames"`` depth), one after the other on device 0.

    ``labels`` name each recording in the frames (``8 x 32``); ``wall_origins`` are the wall-clock
    seconds of each recording's origin, for the events' ``time_us``."""
    if not recordings:
        raise ValueError("memory_snapshot: no recording given")
    trace: list[dict[str, Any]] = []
    alive: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    time_us = 0
    for index, recording in enumerate(recordings):
        if recording.keep != "frames":
            raise ValueError("memory_snapshot needs recordings made with memory='frames' (the frames of each "
                             f"allocation); recording {index} kept {recording.keep!r}")
        label = labels[index] if index < len(labels) else ""
        wall = wall_origins[index] if index < len(wall_origins) else 0.0
        start_us = int(wall * 1e6)
        for address, size, what in recording.persistent:
            frames = _frames((), what, label)
            _allocate(trace, address, size, frames, start_us)
            alive[address] = (size, frames)
        for seconds, address, nbytes, frames, context in recording.events:
            time_us = int((wall + seconds) * 1e6)
            if nbytes > 0:
                described = _frames(frames, context, label)
                _allocate(trace, address, nbytes, described, time_us)
                alive[address] = (nbytes, described)
            elif address in alive:
                size, described = alive.pop(address)
                _free(trace, address, size, described, time_us)
        if index < len(recordings) - 1:  # the next recording starts from nothing of this one
            end_us = max(time_us, start_us)
            for address, (size, described) in sorted(alive.items()):
                _free(trace, address, size, described, end_us)
            alive.clear()
    return {"segments": [_segment(address, size, frames) for address, (size, frames) in sorted(alive.items())],
            "device_traces": [trace]}


def save_memory_snapshot(snapshot: dict[str, Any], path: str | os.PathLike) -> Path:
    """Pickle ``snapshot`` as PyTorch does (``torch.cuda.memory._dump_snapshot``)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as handle:
        pickle.dump(snapshot, handle, protocol=_PICKLE_PROTOCOL)
    return target

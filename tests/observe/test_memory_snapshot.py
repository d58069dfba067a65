"""A window's array allocations as a PyTorch memory snapshot: the allocator's events as
recorded, in the format of torch.cuda.memory._snapshot(), read by PyTorch's own _memory_viz."""

from __future__ import annotations

import pickle
import pickletools
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.accum import Accumulator
from minitorch_accum.observe import AccumulationTrace
from minitorch_accum.observe.memory import ArrayAllocationWatch, array_tracking_available
from minitorch_accum.observe.memory_snapshot import memory_snapshot, save_memory_snapshot
from minitorch_accum.optim import SGD
from tests.accum.helpers import data, mlp, summed_loss

pytestmark = pytest.mark.skipif(not array_tracking_available(), reason="this NumPy has no data-memory handlers")

# the opcodes the viewer's own unpickler (torch/utils/viz/MemoryViz.js) reads; nothing else may appear
VIEWER_OPCODES = {"PROTO", "FRAME", "STOP", "MARK", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET",
                  "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS", "EMPTY_LIST", "LIST", "APPEND", "APPENDS",
                  "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "BININT", "BININT1", "BININT2", "LONG1",
                  "BINFLOAT", "SHORT_BINUNICODE", "BINUNICODE", "NONE", "NEWTRUE", "NEWFALSE"}


def recorded_window(k: int, rows: int, label: str) -> AccumulationTrace:
    model = mlp("float64", hidden=32)
    x, y = data(n=k * rows)
    trace = AccumulationTrace(memory="frames", name=label)
    acc = Accumulator(model, steps=k, trace=trace)

    def micro_batch(i: int) -> None:
        with acc.micro_batch():
            acc.backward(summed_loss(model, x[i * rows:(i + 1) * rows], y[i * rows:(i + 1) * rows], "float64"),
                         num_items=rows)

    optimizer = SGD(lr=0.1, momentum=0.9)
    with trace.recording_memory():
        for i in range(k):
            micro_batch(i)
        with trace.span("optimizer step", "window"):
            optimizer.step(model, acc)  # the momentum buffers stay: alive at the end
        acc.zero()
    return trace


def _allocate_here() -> np.ndarray:
    return np.ones(700)


def test_the_watch_reports_each_array_allocated_inside_and_its_free() -> None:
    before = np.ones(1000)
    with ArrayAllocationWatch(frames=True) as watch:
        made = np.ones(3000)
        address = made.__array_interface__["data"][0]
        del made
        del before  # allocated before the watch: not its business
        kept = np.zeros(500)
        early = watch.drain()
        framed = _allocate_here()
    events = early + watch.drain()
    seen = [(e.address, e.nbytes) for e in events]
    assert watch.active and watch.drain() == []
    times = [e.seconds for e in events]
    assert times == sorted(times) and all(abs(t - time.perf_counter()) < 60 for t in times)
    # by size too: the allocator may give ``framed`` the address ``made`` had
    inner = next(e for e in events if e.address == framed.__array_interface__["data"][0] and e.nbytes == 700 * 8)
    names = [name for _, _, name in inner.frames]  # innermost first: numpy's ones, then its caller
    assert names[0] == "ones" and names[1] == "_allocate_here" and names[2].startswith("test_the_watch")
    assert inner.frames[1][0] == __file__
    assert all(e.frames == () for e in events if e.nbytes < 0)
    seen.remove((framed.__array_interface__["data"][0], 700 * 8))
    assert (address, 3000 * 8) in seen and (address, -3000 * 8) in seen
    assert (kept.__array_interface__["data"][0], 500 * 8) in seen
    assert all(abs(n) != 1000 * 8 for _, n in seen)
    assert sum(n for _, n in seen) == 500 * 8


def test_the_snapshot_holds_every_event_with_frames_naming_the_op() -> None:
    trace = recorded_window(4, 8, "4 x 8")
    snapshot = memory_snapshot([trace.memory], labels=["4 x 8"])
    events = snapshot["device_traces"][0]
    allocs = [e for e in events if e["action"] == "alloc"]
    frees = [e for e in events if e["action"] == "free_completed"]
    made = [e for e in trace.memory.events if e[2] > 0]
    assert len(allocs) == len(made) + len(trace.memory.persistent)
    assert {e["addr"] for e in events if e["action"] == "segment_alloc"} == {e["addr"] for e in allocs}
    # what the window made and did not free is alive at the end: the snapshot's segments, one block each
    alive: dict[int, int] = {}
    for e in events:  # in order: an address freed may be handed out again
        if e["action"] == "alloc":
            assert e["addr"] not in alive
            alive[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            assert alive.pop(e["addr"]) == e["size"]
    assert len(frees) == len(allocs) - len(alive)
    assert {s["address"]: s["total_size"] for s in snapshot["segments"]} == alive
    for segment in snapshot["segments"]:
        block, = segment["blocks"]
        assert block["state"] == "active_allocated" and block["size"] == segment["allocated_size"]
    names = [frame["name"] for e in allocs for frame in e["frames"]]
    assert any(name.endswith(".forward") for name in names) and any(name.endswith(".backward") for name in names)
    places = {e["frames"][-1]["name"] for e in allocs}
    assert {"4 x 8 / micro-batch 0 / forward", "4 x 8 / micro-batch 3 / backward"} <= places
    assert any(p.startswith("4 x 8 / gradient arena") for p in places)
    kept = {s["blocks"][0]["frames"][-1]["name"] for s in snapshot["segments"]}
    assert "4 x 8 / optimizer step" in kept  # SGD's momentum, made at the first step


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_the_snapshot_holds_the_bytes_of_the_arrays_made_no_more_no_less() -> None:
    # arrays of known sizes (above NumPy's small-block cache): the snapshot says what they hold
    trace = AccumulationTrace(memory="frames", name="known")
    with trace.recording_memory():
        first = np.empty(1000)  # 8,000 B
        second = np.empty((30, 50), dtype=np.float32)  # 6,000 B
        made = [(_address(first), 8000), (_address(second), 6000)]
        del first
        third = np.empty(2500)  # 20,000 B (np.ones would add its fill value's 8-byte temporaries)
        made.append((_address(third), 20000))
    events = memory_snapshot([trace.memory], labels=["known"])["device_traces"][0]
    assert [(e["addr"], e["size"]) for e in events if e["action"] == "alloc"] == made
    assert [(e["addr"], e["size"]) for e in events if e["action"] == "free_completed"] == made[:1]
    segments = memory_snapshot([trace.memory])["segments"]
    assert sorted((s["address"], s["total_size"]) for s in segments) == sorted(made[1:])
    assert sum(s["total_size"] for s in segments) == 26000 == second.nbytes + third.nbytes


def test_the_snapshot_of_a_window_adds_up_to_what_the_recorder_recorded() -> None:
    trace = recorded_window(4, 8, "4 x 8")
    recording = trace.memory
    events = memory_snapshot([recording], labels=["4 x 8"])["device_traces"][0]
    allocated = sum(e["size"] for e in events if e["action"] == "alloc")
    freed = sum(e["size"] for e in events if e["action"] == "free_completed")
    made = sum(n for _, _, n, _, _ in recording.events if n > 0)
    persistent = sum(n for _, n, _ in recording.persistent)
    assert allocated == made + persistent and freed == -sum(n for _, _, n, _, _ in recording.events if n < 0)
    # the persistent blocks are the arena and the parameters, by their own sizes
    arena = [n for _, n, what in recording.persistent if what.startswith("gradient arena")]
    assert arena and sum(arena) == [n for track, _, n in trace.counters if track == "arena bytes"][-1]
    assert persistent - sum(arena) == sum(p.data.nbytes for p in mlp("float64", hidden=32).parameters())


def test_two_recordings_follow_each_other_and_the_first_ends_empty() -> None:
    window, batch = recorded_window(4, 4, "4 x 4"), recorded_window(1, 16, "1 x 16")
    snapshot = memory_snapshot([window.memory, batch.memory], labels=["4 x 4", "1 x 16"])
    events = snapshot["device_traces"][0]
    first_of_batch = next(i for i, e in enumerate(events) if e["frames"][-1]["name"].startswith("1 x 16"))
    level = 0
    for e in events[:first_of_batch]:
        level += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
    assert level == 0
    assert all(s["blocks"][0]["frames"][-1]["name"].startswith("1 x 16") for s in snapshot["segments"])
    with pytest.raises(ValueError, match="memory='frames'"):
        memory_snapshot([AccumulationTrace(memory="counter").memory])


def test_the_file_is_a_pickle_the_browser_viewer_can_read(tmp_path: Path) -> None:
    path = save_memory_snapshot(memory_snapshot([recorded_window(2, 4, "2 x 4").memory]), tmp_path / "s.pickle")
    raw = path.read_bytes()
    opcodes = {op.name for op, _, _ in pickletools.genops(raw)}
    assert opcodes <= VIEWER_OPCODES, opcodes - VIEWER_OPCODES
    assert pickle.loads(raw)["device_traces"][0]


@pytest.mark.oracle
def test_pytorch_memory_viz_reads_the_snapshot(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    trace = recorded_window(4, 8, "4 x 8")
    snapshot = memory_snapshot([trace.memory], labels=["4 x 8"])
    path = save_memory_snapshot(snapshot, tmp_path / "window.pickle")

    def memory_viz(action: str) -> str:
        done = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", action, str(path)],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    from torch.cuda._memory_viz import Bytes  # PyTorch's own formatting of sizes

    events = snapshot["device_traces"][0]
    listing = memory_viz("trace")
    assert f"{len(events)} entries" in listing
    allocated = [e for e in events if e["action"] == "alloc"]
    assert listing.count(" = cudaMalloc(") == len(allocated)
    biggest = max(allocated, key=lambda e: e["size"])
    assert f"cudaMalloc({biggest['addr']}, {Bytes(biggest['size'])})" in listing
    alive = sum(s["total_size"] for s in snapshot["segments"])
    assert alive > 0
    stats = memory_viz("stats")  # segsum
    assert f"segments: {len(snapshot['segments'])}" in stats
    assert f"total_allocated: {Bytes(alive)}" in stats and f"total_reserved: {Bytes(alive)}" in stats


def test_the_fallback_trackers_watch_logs_the_same_events() -> None:
    # without the native module the ctypes tracker records the watch's events itself
    from minitorch_accum.observe.numpy_handler_slots import numpy_handler_slots
    from minitorch_accum.observe.python_array_tracker import PythonArrayTracker

    slots = numpy_handler_slots()
    if slots is None:
        pytest.skip("this NumPy has no data-memory handler slots")
    tracker = PythonArrayTracker(slots)
    token = tracker.open_watch(frames=True)
    try:
        made = _allocate_here()
        address = made.__array_interface__["data"][0]
        del made
    finally:
        events = tracker.drain(token)
        tracker.close_watch(token)
    mine = [e for e in events if e.address == address]
    assert [e.nbytes for e in mine] == [700 * 8, -700 * 8]
    assert [name for _, _, name in mine[0].frames][:2] == ["ones", "_allocate_here"]
    first = tracker.open_watch(frames=False)
    try:
        with pytest.raises(ValueError, match="one at a time"):
            tracker.open_watch(frames=False)
    finally:
        tracker.close_watch(first)
    assert np._core.multiarray.get_handler_name() == "default_allocator"  # nothing left current

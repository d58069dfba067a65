"""Memory accounting measured by the allocator, not estimated.

What a micro-batch's forward and backward need is measured as the peak *above* what was
allocated when measuring started, in two parts:

- **arrays**: the bytes of array buffers allocated inside the block and alive at the same
  time, at their peak: the activations saved for backward and the temporaries. On the CPU
  NumPy's own allocator reports them: while a probe is open, array memory is allocated
  through a data-memory handler (NumPy's NEP 49 interface) that forwards every call to
  NumPy's default handler and counts the bytes (``array_tracker.py``). On a GPU a CuPy
  memory hook counts the bytes the memory pool hands out and takes back (device memory
  holds only arrays).
- **total** (CPU): the same arrays *and* every Python object: the graph's nodes, closures,
  tuples and shape lists of one micro-batch, at the peak of the two together. That part is
  about the same for a micro-batch of 8 items or of 8,000; ``other = total - arrays``.

With the native module both are counted in C++ (no Python code in any allocation, so a
Ctrl-C never lands inside one; Python objects through a hook on PyMem's MEM and OBJ
domains, in place only while a probe is open). Without it, arrays are counted by ctypes
callbacks, and Python objects only when tracemalloc is already tracing (its peak is then the
total); otherwise the total is the arrays alone and ``other_bytes`` is None. PeakMemory never
starts tracemalloc while the array handler works: starting and stopping it around each
probe leaked memory on CPython 3.11 (about 12 KiB per micro-batch of a small model).

Parameters, the gradient arena and optimizer state already exist when a probe opens and
are counted separately, from their arrays (``MemoryReport``). The accumulation's own writes
into the arena are left out (``not_counted``, around each write while a probe or a watch is
open: ``observe/watched_writes.py``): what they allocate depends on the kernel path
(the NumPy reference computes ``s * g`` and a norm's squares apart, the native and CUDA
kernels write in place), while a micro-batch's activations do not; so the native and emulated
paths report the same figure for the same micro-batch. The NumPy reference path reports a few
hundred bytes more: its fused ops (cross-entropy, LayerNorm, GELU) compute in NumPy with
temporaries of a row block's size alive at the peak, where the native kernels keep them in
registers.
"""

from __future__ import annotations

import tracemalloc
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any

from minitorch_accum.backend import Device, DeviceLike, parse_device
from minitorch_accum.observe.array_tracker import array_tracker
from minitorch_accum.observe.tracker_interface import AllocationEvent, ArrayTracker

__all__ = ["AllocationEvent", "ArrayAllocationWatch", "MemoryReport", "PeakMemory", "array_bytes",
           "array_tracking_available", "memory_watched", "not_counted", "probe_bookkeeping_running"]

# how many not_counted() blocks are open (one list cell: the CuPy hook reads it)
_EXCLUDED = [0]
# how many probes and watches are open: only then is there anything for not_counted() to leave out
_WATCHING = [0]


def memory_watched() -> bool:
    """Whether a PeakMemory probe or an ArrayAllocationWatch is open now (then the arena's writes
    run under ``not_counted()``: observe/watched_writes.py)."""
    return _WATCHING[0] > 0


class _NotCounted:
    """The context manager ``not_counted()`` returns (one object, re-entered: the arena's writes
    enter it for every leaf, so it costs no generator): the outermost block tells the tracker."""

    __slots__ = ()

    def __enter__(self) -> None:
        _EXCLUDED[0] += 1
        if _EXCLUDED[0] == 1:
            tracker = array_tracker()
            if tracker is not None:
                tracker.exclude(True)

    def __exit__(self, *exc: object) -> None:
        _EXCLUDED[0] -= 1
        if _EXCLUDED[0] == 0:
            tracker = array_tracker()
            if tracker is not None:
                tracker.exclude(False)


_NOT_COUNTED = _NotCounted()


def not_counted() -> _NotCounted:
    """Arrays and Python objects allocated inside are left out of every open probe and watch, on
    the CPU and on a GPU (the arena's writes: see the module docstring). Without the native module,
    where tracemalloc's peak is the total, objects made inside still count."""
    return _NOT_COUNTED


class PeakMemory:
    """Context manager measuring the peak memory of the code inside, above the level at entry.

    ``array_peak_bytes``: array buffers allocated inside and alive together, at their peak
    (None on the CPU when this NumPy offers no data-memory handler). ``peak_bytes``: the peak
    of everything (CPU: arrays and Python objects together; GPU: device memory, the same as
    ``array_peak_bytes``). ``other_bytes``: ``peak_bytes - array_peak_bytes``, the Python
    objects (0 on a GPU; None when arrays or objects are not measured apart, see the module
    docstring).
    """

    def __init__(self, device: DeviceLike = "cpu") -> None:
        self.device: Device = parse_device(device)
        self.peak_bytes = 0
        self.array_peak_bytes: int | None = 0
        self._objects_counted = True
        self._hook: Any = None
        self._tracker: ArrayTracker | None = None
        self._token: Any = None
        self._tracing: _TracemallocPeak | None = None

    @property
    def other_bytes(self) -> int | None:
        if self.array_peak_bytes is None or not self._objects_counted:
            return None
        # with tracemalloc's total, a buffer that existed before the probe and was freed inside
        # it lowers the level but is not one of the probe's arrays: the difference can dip below 0
        return max(0, self.peak_bytes - self.array_peak_bytes)

    def __enter__(self) -> PeakMemory:
        if self.device.kind == "cpu":
            self._tracker = array_tracker()
            if self._tracker is None or not self._tracker.counts_objects:
                # no tracker at all: tracemalloc is the only measure, started if need be
                self._tracing = _TracemallocPeak.open(start=self._tracker is None)
            self._token = self._tracker.open() if self._tracker is not None else None
        else:
            self._hook = _cupy_peak_hook()
            self._hook.__enter__()
        _WATCHING[0] += 1
        return self

    def __exit__(self, *exc: object) -> None:
        _WATCHING[0] -= 1
        if self.device.kind == "cpu":
            arrays, total = None, None
            if self._tracker is not None:
                arrays, total = self._tracker.close(self._token)
                self._token = None
            if self._tracing is not None:
                total = self._tracing.close()
                self._tracing = None
            self.array_peak_bytes = arrays
            self._objects_counted = total is not None
            self.peak_bytes = total if total is not None else (arrays or 0)
        else:
            self._hook.__exit__(*exc)
            self.peak_bytes = self.array_peak_bytes = self._hook.peak


class ArrayAllocationWatch:
    """Every NumPy array buffer allocated while the watch is open, and the free of each of those
    while it is still open, as ``AllocationEvent``s handed out by ``drain()`` (oldest first): what
    a memory timeline is drawn from. ``frames=True`` adds the Python frames that allocated each.

    With the native module the events are logged in C++ (no Python code in the allocator, so a
    signal never lands there); drain often enough (at every span, say) that the log stays small.
    ``active`` is False when this NumPy offers no data-memory handler (nothing is recorded).
    One watch at a time; it nests with PeakMemory probes."""

    def __init__(self, frames: bool = False) -> None:
        self.frames = frames
        self.active = False
        self._tracker: ArrayTracker | None = None
        self._token: Any = None
        self._left: list[AllocationEvent] = []

    def __enter__(self) -> ArrayAllocationWatch:
        self._tracker = array_tracker()
        if self._tracker is not None:
            self._token = self._tracker.open_watch(self.frames)
            self.active = True
        _WATCHING[0] += 1
        return self

    def drain(self) -> list[AllocationEvent]:
        """The events since the last drain (after the watch closed: those it had not handed out)."""
        left, self._left = self._left, []
        if self._tracker is None or self._token is None:
            return left
        return left + self._tracker.drain(self._token)

    def __exit__(self, *exc: object) -> None:
        _WATCHING[0] -= 1
        if self._tracker is not None and self._token is not None:
            self._left += self._tracker.drain(self._token)
            self._tracker.close_watch(self._token)
            self._token = None


class _TracemallocPeak:
    """tracemalloc's peak above the level at ``open``: it counts Python objects and, in NumPy's
    domain, the same array buffers. Only when tracemalloc is tracing already, or when asked to
    start it (then it is stopped at ``close``)."""

    def __init__(self, started: bool) -> None:
        self.started = started
        self.baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()

    @classmethod
    def open(cls, start: bool) -> _TracemallocPeak | None:
        if tracemalloc.is_tracing():
            return cls(started=False)
        if not start:
            return None
        tracemalloc.start()
        return cls(started=True)

    def close(self) -> int:
        _, peak = tracemalloc.get_traced_memory()
        if self.started:
            tracemalloc.stop()
        return max(0, peak - self.baseline)


def array_tracking_available() -> bool:
    """Whether array bytes can be measured apart from Python objects on the CPU (NumPy >= 1.22)."""
    return array_tracker() is not None


def probe_bookkeeping_running(frame: FrameType | None) -> bool:
    """Whether ``frame`` (given to a signal handler) is, or is called from, a probe's own
    bookkeeping: opening or closing one, or (without the native module) a ctypes allocator
    callback. An exception raised there would leave a probe open or an allocation half done
    (ctypes swallows it), so a signal handler that raises should defer instead."""
    tracker = array_tracker()
    own = {PeakMemory.__enter__.__code__, PeakMemory.__exit__.__code__}
    for _ in range(_BOOKKEEPING_DEPTH):
        if frame is None:
            return False
        if frame.f_code in own or (tracker is not None and tracker.runs_python_in(frame)):
            return True
        frame = frame.f_back
    return False


# PeakMemory.__enter__ -> tracker.open -> memory_counter.open_probe -> dispatch.native: the
# deepest Python frame under a probe's bookkeeping is four calls down
_BOOKKEEPING_DEPTH = 6


def _cupy_peak_hook() -> Any:
    from cupy.cuda import memory_hook

    class _PeakHook(memory_hook.MemoryHook):
        name = "minitorch_accum_peak"

        def __init__(self) -> None:
            self.current = 0
            self.peak = 0
            self.excluded: set[int] = set()  # blocks handed out under not_counted()

        def malloc_postprocess(self, device_id: int, size: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            if _EXCLUDED[0]:
                self.excluded.add(mem_ptr)
                return
            self.current += mem_size
            self.peak = max(self.peak, self.current)

        def free_postprocess(self, device_id: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            if mem_ptr in self.excluded:
                self.excluded.discard(mem_ptr)
                return
            self.current -= mem_size

    return _PeakHook()


def array_bytes(arrays: Any) -> int:
    """Total bytes of the arrays in a (nested) dict/list of arrays."""
    if hasattr(arrays, "nbytes") and hasattr(arrays, "shape"):
        return int(arrays.nbytes)
    if isinstance(arrays, dict):
        return sum(array_bytes(v) for v in arrays.values())
    if isinstance(arrays, list | tuple):
        return sum(array_bytes(v) for v in arrays)
    return 0


@dataclass(frozen=True)
class MemoryReport:
    """Bytes by what they hold, for one micro-batch."""

    parameters: int
    arena: int
    optimizer_state: int
    activations: int  # peak above the persistent state during forward + backward

    @property
    def total(self) -> int:
        return self.parameters + self.arena + self.optimizer_state + self.activations

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}

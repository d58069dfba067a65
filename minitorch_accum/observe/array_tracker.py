"""Who counts array bytes for PeakMemory on the CPU: the tracker that makes a counting NumPy
data-memory handler (NEP 49, ``numpy_handler_slots.py``) current while a probe is open.

Two trackers share one small interface (``tracker_interface.py``: ``open() -> token``, ``close(token) -> (array peak,
total peak or None)``, ``counts_objects``, ``runs_python_in(frame)``, and the watch of a memory
timeline: ``open_watch(frames) -> token``, ``drain(token) -> events``, ``close_watch(token)``;
and ``exclude(on)``, which leaves the arena's own writes out of all of them):

- ``NativeArrayTracker`` (the native module is built): the handler and a hook on Python's
  object allocator are C++ (csrc/native/memory_counter.cpp); no Python code runs in any
  allocation, so no signal handler can run, or raise, inside one. It counts Python objects
  too, without tracemalloc (whose start and stop around every probe leaked about 30 bytes
  per traced allocation site on CPython 3.11: ~12 KiB per micro-batch of a small model).
- ``PythonArrayTracker`` (python_array_tracker.py, without the native module): ctypes
  callbacks count arrays only; a signal may then run its Python handler inside one.

``runs_python_in(frame)`` tells a signal handler that it interrupted the tracker's own code
(opening or closing, or a fallback callback), where raising would leave a probe open or an
allocation half done: the Learner's stop request then waits for the micro-batch to end.

A watch logs every array buffer allocated while it is open, and the free of each of those,
as ``AllocationEvent``s (perf_counter seconds, address, +bytes or -bytes, the allocating
Python frames when asked, innermost first): the native tracker logs them in C++ (frames read
through the C API, no Python code in the allocator) for Python to drain; the fallback appends
them from its callbacks. One watch at a time.
"""

from __future__ import annotations

import time
from types import FrameType
from typing import Any

from minitorch_accum.kernels import memory_counter
from minitorch_accum.observe.numpy_handler_slots import NumpyHandlerSlots, numpy_handler_slots
from minitorch_accum.observe.python_array_tracker import PythonArrayTracker
from minitorch_accum.observe.tracker_interface import AllocationEvent, ArrayTracker

__all__ = ["NativeArrayTracker", "array_tracker"]


class NativeArrayTracker:
    """The native counter's handler, current while a probe is open; it counts Python objects too."""

    counts_objects = True

    def __init__(self, slots: NumpyHandlerSlots) -> None:
        self._slots = slots
        self._capsule = memory_counter.counting_handler(slots.default_capsule)
        slots.prove(self._capsule)

    def open(self) -> tuple[int, Any]:
        probe = memory_counter.open_probe(count_objects=True)
        return probe, self._slots.set_handler(self._capsule)

    def close(self, token: tuple[int, Any]) -> tuple[int, int | None]:
        probe, previous = token
        self._slots.set_handler(previous)
        return memory_counter.close_probe(probe)

    def runs_python_in(self, frame: FrameType | None) -> bool:
        """Whether ``frame`` is this tracker's opening or closing (its allocator has no Python code)."""
        return frame is not None and frame.f_code in _NATIVE_BOOKKEEPING

    def open_watch(self, frames: bool) -> tuple[int, Any, float]:
        watch = memory_counter.open_watch(frames)
        # the log's steady clock and perf_counter are both CLOCK_MONOTONIC on Linux; the offset
        # makes the times right wherever they are not
        offset = time.perf_counter() - memory_counter.clock_seconds()
        return watch, self._slots.set_handler(self._capsule), offset

    def drain(self, token: tuple[int, Any, float]) -> list[AllocationEvent]:
        offset = token[2]
        return [AllocationEvent(seconds + offset, address, nbytes, frames)
                for seconds, address, nbytes, frames in memory_counter.drain_watch()]

    def close_watch(self, token: tuple[int, Any, float]) -> None:
        watch, previous, _ = token
        self._slots.set_handler(previous)
        memory_counter.close_watch(watch)

    def exclude(self, on: bool) -> None:
        """Leave what is allocated from now on out of every probe and watch (``on``), or stop."""
        memory_counter.exclude(on)


_NATIVE_BOOKKEEPING = {NativeArrayTracker.open.__code__, NativeArrayTracker.close.__code__,
                       NativeArrayTracker.open_watch.__code__, NativeArrayTracker.close_watch.__code__}
_TRACKER: list[ArrayTracker | None] = []


def array_tracker() -> ArrayTracker | None:
    """The tracker of this process (chosen once): native when the module is built, else the
    ctypes fallback; None when NumPy's handler slots cannot be used."""
    if not _TRACKER:
        slots = numpy_handler_slots()
        tracker: ArrayTracker | None = None
        if slots is not None:
            try:
                if memory_counter.available():
                    tracker = NativeArrayTracker(slots)
                else:
                    tracker = PythonArrayTracker(slots)
            except (OSError, ValueError, TypeError, RuntimeError):
                tracker = None
        _TRACKER.append(tracker)
    return _TRACKER[0]

"""Who counts array bytes for PeakMemory on the CPU: NumPy's data-memory handler slots (NEP 49),
and the tracker that makes a counting handler current while a probe is open.

Two trackers share one small interface (``open() -> token``, ``close(token) -> (array peak,
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

import ctypes
import time
from types import FrameType
from typing import Any, NamedTuple, Protocol

from minitorch_accum.kernels import memory_counter

__all__ = [
    "HANDLER_NAME",
    "AllocationEvent",
    "ArrayTracker",
    "DataAllocator",
    "DataHandler",
    "NativeArrayTracker",
    "NumpyHandlerSlots",
    "array_tracker",
    "numpy_handler_slots",
]

# slots of NumPy's C-API table (numpy/__multiarray_api.h, fixed since NumPy 1.22)
_SET_HANDLER, _GET_HANDLER = 304, 305
HANDLER_NAME = b"minitorch_accum_array_bytes"


class DataAllocator(ctypes.Structure):
    """NumPy's PyDataMemAllocator (ndarraytypes.h): a context and the addresses of malloc,
    calloc, realloc and free (ctx, size...) functions."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("ctx", "malloc", "calloc", "realloc", "free")]


class DataHandler(ctypes.Structure):
    """NumPy's PyDataMem_Handler: a name, version 1, the allocator."""

    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", DataAllocator)]


class NumpyHandlerSlots:
    """NumPy's PyDataMem_SetHandler and the handler current when found (NumPy's default one).

    ``set_handler(capsule) -> previous capsule``: NumPy keeps the current handler in a context
    variable, so a handler made current affects only the thread (context) that set it."""

    def __init__(self) -> None:
        import numpy as np

        core = getattr(np, "_core", None) or np.core  # NumPy 2 renamed the package
        api = ctypes.pythonapi
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        table = ctypes.cast(api.PyCapsule_GetPointer(core._multiarray_umath._ARRAY_API, None),
                            ctypes.POINTER(ctypes.c_void_p))
        # PYFUNCTYPE: these calls keep the GIL (they read and set a context variable)
        self.set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(table[_SET_HANDLER])
        self.default_capsule = ctypes.PYFUNCTYPE(ctypes.py_object)(table[_GET_HANDLER])()
        self.default = DataHandler.from_address(api.PyCapsule_GetPointer(self.default_capsule, b"mem_handler"))
        self.handler_name = core.multiarray.get_handler_name
        if self.default.name.decode() != self.handler_name() or self.default.version != 1:
            raise ValueError("NumPy's C-API table does not hold the data-memory handler functions where expected")

    def prove(self, capsule: Any) -> None:
        """One round trip: NumPy must name the handler in ``capsule`` once it is current."""
        previous = self.set_handler(capsule)
        try:
            if self.handler_name() != HANDLER_NAME.decode():
                raise ValueError("NumPy did not take the array-counting data-memory handler")
        finally:
            self.set_handler(previous)


class AllocationEvent(NamedTuple):
    """One array buffer allocated (``nbytes`` > 0) or freed (< 0) while a watch was open."""

    seconds: float  # on time.perf_counter's clock
    address: int
    nbytes: int
    frames: tuple[tuple[str, int, str], ...]  # (file, line, qualified name), innermost first


class ArrayTracker(Protocol):
    """What PeakMemory and ArrayAllocationWatch ask of a tracker (see the module docstring)."""

    counts_objects: bool

    def open(self) -> Any: ...

    def close(self, token: Any) -> tuple[int, int | None]: ...

    def runs_python_in(self, frame: FrameType | None) -> bool: ...

    def open_watch(self, frames: bool) -> Any: ...

    def drain(self, token: Any) -> list[AllocationEvent]: ...

    def close_watch(self, token: Any) -> None: ...

    def exclude(self, on: bool) -> None: ...


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


def numpy_handler_slots() -> NumpyHandlerSlots | None:
    """NumPy's handler slots, or None when this NumPy does not hold them where expected."""
    try:
        return NumpyHandlerSlots()
    except (AttributeError, ImportError, OSError, ValueError, TypeError):
        return None


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
                    from minitorch_accum.accum.python_array_tracker import PythonArrayTracker

                    tracker = PythonArrayTracker(slots)
            except (OSError, ValueError, TypeError, RuntimeError):
                tracker = None
        _TRACKER.append(tracker)
    return _TRACKER[0]

"""The array tracker without the native module: a NEP 49 data-memory handler made of ctypes
callbacks that forward to NumPy's default handler, counting array bytes (not Python objects).

NumPy calls the handler with the GIL held. An array remembers the handler that allocated it
and is freed through it even after the probe has closed, as late as interpreter shutdown,
when calling into Python is no longer safe. So the handler's function table holds the
counting Python callbacks only while a probe is open; otherwise it holds NumPy's own C
functions, and a late free never enters Python.

The callbacks are Python code, so a signal's Python handler can run inside one; if it
raises there, ctypes prints "Exception ignored on calling ctypes callback function" and
the allocation goes wrong (NumPy sees a failed malloc, or a free is skipped). A handler
that must raise asks ``observe.memory.probe_bookkeeping_running(frame)`` first and defers (the
Learner's stop request does); the native tracker has no such window. Probes are meant for one thread at a time.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import sys
import time
from types import FrameType
from typing import Any

from minitorch_accum.observe.numpy_handler_slots import HANDLER_NAME, DataAllocator, DataHandler, NumpyHandlerSlots
from minitorch_accum.observe.tracker_interface import AllocationEvent

__all__ = ["PythonArrayTracker"]

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_CALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
_REALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
# how many frames up from a signal handler's frame to look for a callback (callback -> counted)
_HOOK_DEPTH = 3
_FRAME_LIMIT = 32


class _Watch:
    """The fallback's watch: its events, and whether it takes frames."""

    __slots__ = ("events", "frames", "probe")

    def __init__(self, frames: bool) -> None:
        self.events: list[AllocationEvent] = []
        self.frames = frames
        self.probe: _Counter | None = None


def _stack(depth: int) -> tuple[tuple[str, int, str], ...]:
    frames = []
    frame: FrameType | None = sys._getframe(depth)
    while frame is not None and len(frames) < _FRAME_LIMIT:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname))
        frame = frame.f_back
    return tuple(frames)


class _Counter:
    """The bytes one open probe has seen allocated and not yet freed, and their peak."""

    __slots__ = ("current", "peak", "previous_handler", "since")

    def __init__(self, since: int) -> None:
        self.current = 0
        self.peak = 0
        self.since = since  # allocations numbered above this one belong to the probe
        self.previous_handler: Any = None


class PythonArrayTracker:
    """Counts array bytes through ctypes callbacks (see the module docstring)."""

    counts_objects = False

    def __init__(self, slots: NumpyHandlerSlots) -> None:
        self._slots = slots
        self._open: list[_Counter] = []
        self._serial = itertools.count(1)
        self._live: dict[int, tuple[int, int]] = {}  # pointer -> (bytes, serial number of the allocation)
        self._watches: list[_Watch] = []
        self._excluded = [False]  # one cell, read by the callbacks
        self._install(slots.default.allocator)
        # a probe left open at exit (an uncaught signal) must not leave Python callbacks behind
        atexit.register(self._use, "forwarding")
        slots.prove(self._capsule)

    def _install(self, base: DataAllocator) -> None:
        api = ctypes.pythonapi
        api.PyCapsule_New.restype = ctypes.py_object
        api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        forwarding = tuple(getattr(base, name) for name, _ in DataAllocator._fields_)
        base_ctx = base.ctx
        # NumPy's functions, called from the callbacks without releasing the GIL (PYFUNCTYPE):
        # they are plain C, and the callbacks run with the GIL held
        base_malloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(base.malloc)
        base_calloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_size_t)(base.calloc)
        base_realloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_size_t)(base.realloc)
        base_free = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(base.free)
        live, open_counters, serial, watches = self._live, self._open, self._serial, self._watches
        excluded = self._excluded

        def counted(pointer: int | None, size: int) -> None:
            if pointer and not excluded[0]:
                number = next(serial)
                live[pointer] = (size, number)
                for counter in open_counters:
                    counter.current += size
                    if counter.current > counter.peak:
                        counter.peak = counter.current
                for watch in watches:
                    watch.events.append(AllocationEvent(time.perf_counter(), pointer, size,
                                                        _stack(3) if watch.frames else ()))

        def released(pointer: int | None) -> None:
            entry = live.pop(pointer, None) if pointer else None
            if entry is not None:
                size, number = entry
                for counter in open_counters:
                    if number > counter.since:  # a probe opened later never counted it
                        counter.current -= size
                for watch in watches:
                    if watch.probe is not None and number > watch.probe.since:
                        watch.events.append(AllocationEvent(time.perf_counter(), pointer, -size, ()))

        def malloc(ctx: int, size: int) -> int | None:
            pointer = base_malloc(base_ctx, size)
            counted(pointer, size)
            return pointer

        def calloc(ctx: int, count: int, size: int) -> int | None:
            pointer = base_calloc(base_ctx, count, size)
            counted(pointer, count * size)
            return pointer

        def realloc(ctx: int, pointer: int | None, size: int) -> int | None:
            moved = base_realloc(base_ctx, pointer, size)
            if moved:  # on failure the old block stays allocated and counted
                released(pointer)
                counted(moved, size)
            return moved

        def free(ctx: int, pointer: int | None, size: int) -> None:
            released(pointer)
            base_free(base_ctx, pointer, size)

        self._hook_code = {f.__code__ for f in (counted, released, malloc, calloc, realloc, free, _stack)}
        self._hook_code |= {PythonArrayTracker.open.__code__, PythonArrayTracker.close.__code__}
        self._callbacks = (_MALLOC(malloc), _CALLOC(calloc), _REALLOC(realloc), _FREE(free))  # kept alive
        counting = (base_ctx, *(ctypes.cast(f, ctypes.c_void_p).value for f in self._callbacks))
        self._tables = {"counting": counting, "forwarding": forwarding}
        self._struct = DataHandler(HANDLER_NAME, 1, DataAllocator(*forwarding))
        self._capsule = api.PyCapsule_New(ctypes.addressof(self._struct), b"mem_handler", None)

    def _use(self, table: str) -> None:
        for (name, _), address in zip(DataAllocator._fields_, self._tables[table], strict=True):
            setattr(self._struct.allocator, name, address)

    def open(self) -> _Counter:
        if not self._open:
            # pointers left from earlier probes were freed, or will be, by NumPy's own free
            # while no probe was open: they concern no probe from now on
            self._live.clear()
            self._use("counting")
        # allocations numbered after this one are the probe's (a number no allocation will use)
        counter = _Counter(since=next(self._serial))
        self._open.append(counter)
        counter.previous_handler = self._slots.set_handler(self._capsule)
        return counter

    def close(self, counter: _Counter) -> tuple[int, int | None]:
        self._slots.set_handler(counter.previous_handler)
        counter.previous_handler = None
        self._open.remove(counter)
        if not self._open:
            self._use("forwarding")
        return counter.peak, None

    def runs_python_in(self, frame: FrameType | None) -> bool:
        """Whether ``frame`` (a signal handler's) is a callback, opening or closing, or called from one."""
        for _ in range(_HOOK_DEPTH):
            if frame is None:
                return False
            if frame.f_code in self._hook_code:
                return True
            frame = frame.f_back
        return False

    def open_watch(self, frames: bool) -> _Watch:
        if self._watches:
            raise ValueError("a memory watch is open already (one at a time)")
        watch = _Watch(frames)
        watch.probe = self.open()
        self._watches.append(watch)
        return watch

    def drain(self, watch: _Watch) -> list[AllocationEvent]:
        events, watch.events = watch.events, []
        return events

    def close_watch(self, watch: _Watch) -> None:
        self._watches.remove(watch)
        if watch.probe is not None:
            self.close(watch.probe)

    def exclude(self, on: bool) -> None:
        self._excluded[0] = on

"""Memory accounting measured by the allocator, not estimated.

What a micro-batch's forward and backward need is measured as the peak *above* what was
allocated when measuring started, in two parts:

- **arrays**: the bytes of array buffers allocated inside the block and alive at the same
  time, at their peak: the activations saved for backward and the temporaries. On the CPU
  NumPy's own allocator reports them: while a probe is open, array memory is allocated
  through a data-memory handler (NumPy's NEP 49 interface) that forwards every call to
  NumPy's default handler and counts the bytes. On a GPU a CuPy memory hook counts the
  bytes the memory pool hands out and takes back (device memory holds only arrays).
- **total** (CPU): ``tracemalloc``'s peak, which counts the same array buffers (NumPy
  reports them in its own tracemalloc domain, 389047) *and* every Python object: the
  graph's nodes, closures, tuples and shape lists of one micro-batch. That part is about
  the same for a micro-batch of 8 items or of 8,000; ``other = total - arrays``.

Parameters, the gradient arena and optimizer state already exist when a probe opens and
are counted separately, from their arrays (``MemoryReport``). The accumulation's own writes
into the arena are left out (``not_counted``): what they allocate depends on the kernel path
(the NumPy reference computes ``s * g`` and a norm's squares apart, the native and CUDA
kernels write in place), while a micro-batch's activations do not; so every path reports the
same figure for the same micro-batch.
"""

from __future__ import annotations

import ctypes
import itertools
import tracemalloc
from dataclasses import asdict, dataclass
from typing import Any

from minitorch_accum.backend import Device, DeviceLike, parse_device

__all__ = ["MemoryReport", "PeakMemory", "array_bytes", "array_tracking_available", "not_counted"]

# how many not_counted() blocks are open (one list cell, read by the allocator's callbacks)
_EXCLUDED = [0]


class _NotCounted:
    """The context manager ``not_counted()`` returns (one object, re-entered: the arena's writes
    enter it for every leaf, so it costs no generator): the outermost block does the work."""

    __slots__ = ("counters",)

    def __init__(self) -> None:
        self.counters: list[_Counter] = []

    def __enter__(self) -> None:
        _EXCLUDED[0] += 1
        # tracemalloc sees everything: its peak so far is kept aside, and its peak inside dropped
        if _EXCLUDED[0] == 1 and _TRACKER.open_counters() and tracemalloc.is_tracing():
            self.counters = list(_TRACKER.open_counters())
            before = tracemalloc.get_traced_memory()[1]
            for counter in self.counters:
                counter.total_peak = max(counter.total_peak, before)

    def __exit__(self, *exc: object) -> None:
        _EXCLUDED[0] -= 1
        if _EXCLUDED[0] == 0 and self.counters:
            self.counters = []
            tracemalloc.reset_peak()


def not_counted() -> _NotCounted:
    """Arrays allocated inside are left out of every open probe, on the CPU and on a GPU, and
    the probes' totals do not count them either (the arena's writes: see the module docstring)."""
    return _NOT_COUNTED


class PeakMemory:
    """Context manager measuring the peak memory of the code inside, above the level at entry.

    ``array_peak_bytes``: array buffers allocated inside and alive together, at their peak
    (None on the CPU when this NumPy offers no data-memory handler). ``peak_bytes``: the peak
    of everything (CPU: tracemalloc, arrays and Python objects; GPU: device memory, the same
    as ``array_peak_bytes``). ``other_bytes``: ``peak_bytes - array_peak_bytes``, the Python
    objects and other host allocations (0 on a GPU, None when arrays are not measured).
    """

    def __init__(self, device: DeviceLike = "cpu") -> None:
        self.device: Device = parse_device(device)
        self.peak_bytes = 0
        self.array_peak_bytes: int | None = 0
        self._started_tracing = False
        self._hook: Any = None
        self._counter: _Counter | None = None

    @property
    def other_bytes(self) -> int | None:
        if self.array_peak_bytes is None:
            return None
        # a buffer that existed before the probe and was freed inside it lowers tracemalloc's
        # level but is not one of the probe's arrays: the difference can dip below zero
        return max(0, self.peak_bytes - self.array_peak_bytes)

    def __enter__(self) -> PeakMemory:
        if self.device.kind == "cpu":
            if not tracemalloc.is_tracing():
                tracemalloc.start()
                self._started_tracing = True
            self._baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            self._counter = _TRACKER.open() if _TRACKER.available() else None
        else:
            self._hook = _cupy_peak_hook()
            self._hook.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.kind == "cpu":
            _, peak = tracemalloc.get_traced_memory()
            self.peak_bytes = max(0, peak - self._baseline)
            if self._counter is not None:
                _TRACKER.close(self._counter)
                self.array_peak_bytes = self._counter.peak
                # the peaks tracemalloc reached outside not_counted() blocks (they reset it)
                self.peak_bytes = max(self.peak_bytes, self._counter.total_peak - self._baseline)
            else:
                self.array_peak_bytes = None
            if self._started_tracing:
                tracemalloc.stop()
        else:
            self._hook.__exit__(*exc)
            self.peak_bytes = self.array_peak_bytes = self._hook.peak


def array_tracking_available() -> bool:
    """Whether array bytes can be measured apart from Python objects on the CPU (NumPy >= 1.22)."""
    return _TRACKER.available()


# ------------------------------------------------------------------ NumPy's allocator
class _Allocator(ctypes.Structure):
    """NumPy's PyDataMemAllocator (ndarraytypes.h): a context and the addresses of malloc,
    calloc, realloc and free (ctx, size...) functions."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("ctx", "malloc", "calloc", "realloc", "free")]


class _Handler(ctypes.Structure):
    """NumPy's PyDataMem_Handler: a name, version 1, the allocator."""

    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", _Allocator)]


# slots of NumPy's C-API table (numpy/__multiarray_api.h, fixed since NumPy 1.22)
_SET_HANDLER, _GET_HANDLER = 304, 305
_HANDLER_NAME = b"minitorch_accum_array_bytes"

_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_CALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
_REALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class _Counter:
    """The bytes one open probe has seen allocated and not yet freed, and their peak."""

    __slots__ = ("current", "peak", "previous_handler", "since", "total_peak")

    def __init__(self, since: int) -> None:
        self.current = 0
        self.peak = 0
        self.total_peak = 0  # tracemalloc's peak before a not_counted() block reset it
        self.since = since  # allocations numbered above this one belong to the probe
        self.previous_handler: Any = None


class _ArrayTracker:
    """A NEP 49 data-memory handler that forwards to NumPy's default handler, counting.

    NumPy keeps the current handler in a context variable, so installing it while a probe is
    open affects only the thread that opened it; NumPy calls it with the GIL held. An array
    remembers the handler that allocated it and is freed through it even after the probe has
    closed, as late as interpreter shutdown, when calling into Python is no longer safe. So the
    handler's function table holds the counting Python callbacks only while a probe is open;
    otherwise it holds NumPy's own C functions, and a late free never enters Python. Probes are
    meant for one thread at a time: an open probe counts the arrays of any thread that opened
    one too.
    """

    def __init__(self) -> None:
        self._checked: bool | None = None
        self._open: list[_Counter] = []
        self._serial = itertools.count(1)

    def available(self) -> bool:
        if self._checked is None:
            try:
                self._install()
                self._checked = True
            except (AttributeError, ImportError, OSError, ValueError, TypeError):
                self._checked = False
        return self._checked

    def _install(self) -> None:
        import atexit

        import numpy as np

        core = getattr(np, "_core", None) or np.core  # NumPy 2 renamed the package
        api = ctypes.pythonapi
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        api.PyCapsule_New.restype = ctypes.py_object
        api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        table = ctypes.cast(api.PyCapsule_GetPointer(core._multiarray_umath._ARRAY_API, None),
                            ctypes.POINTER(ctypes.c_void_p))
        # PYFUNCTYPE: these calls keep the GIL (they read and set a context variable)
        set_handler = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(table[_SET_HANDLER])
        base = _Handler.from_address(api.PyCapsule_GetPointer(ctypes.PYFUNCTYPE(ctypes.py_object)(
            table[_GET_HANDLER])(), b"mem_handler"))
        if base.name.decode() != core.multiarray.get_handler_name() or base.version != 1:
            raise ValueError("NumPy's C-API table does not hold the data-memory handler functions where expected")
        forwarding = tuple(getattr(base.allocator, name) for name, _ in _Allocator._fields_)
        base_ctx = base.allocator.ctx
        # NumPy's functions, called from the callbacks without releasing the GIL (PYFUNCTYPE):
        # they are plain C, and the callbacks run with the GIL held
        base_malloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_size_t)(base.allocator.malloc)
        base_calloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                        ctypes.c_size_t)(base.allocator.calloc)
        base_realloc = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_size_t)(base.allocator.realloc)
        base_free = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(base.allocator.free)
        # pointer -> (bytes, serial number of the allocation, allocated under not_counted())
        live: dict[int, tuple[int, int, bool]] = {}
        open_counters = self._open
        serial = self._serial
        excluded = _EXCLUDED

        def counted(pointer: int | None, size: int) -> None:
            if pointer:
                number = next(serial)
                aside = excluded[0] > 0
                live[pointer] = (size, number, aside)
                if aside:
                    return
                for counter in open_counters:
                    counter.current += size
                    if counter.current > counter.peak:
                        counter.peak = counter.current

        def released(pointer: int | None) -> None:
            entry = live.pop(pointer, None) if pointer else None
            if entry is not None:
                size, number, aside = entry
                if aside:
                    return
                for counter in open_counters:
                    if number > counter.since:  # a probe opened later never counted it
                        counter.current -= size

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

        self._callbacks = (_MALLOC(malloc), _CALLOC(calloc), _REALLOC(realloc), _FREE(free))  # kept alive
        counting = (base_ctx, *(ctypes.cast(f, ctypes.c_void_p).value for f in self._callbacks))
        self._tables = {"counting": counting, "forwarding": forwarding}
        self._struct = _Handler(_HANDLER_NAME, 1, _Allocator(*forwarding))
        self._capsule = api.PyCapsule_New(ctypes.addressof(self._struct), b"mem_handler", None)
        self._set_handler = set_handler
        self._live = live
        # a probe left open at exit (an uncaught signal) must not leave Python callbacks behind
        atexit.register(self._use, "forwarding")
        # one round trip proves the slots: NumPy must now name this handler
        previous = set_handler(self._capsule)
        try:
            if core.multiarray.get_handler_name() != _HANDLER_NAME.decode():
                raise ValueError("NumPy did not take the array-counting data-memory handler")
        finally:
            set_handler(previous)

    def _use(self, table: str) -> None:
        for (name, _), address in zip(_Allocator._fields_, self._tables[table], strict=True):
            setattr(self._struct.allocator, name, address)

    def open_counters(self) -> list[_Counter]:
        """The counters of the probes open now."""
        return self._open

    def open(self) -> _Counter:
        if not self._open:
            # pointers left from earlier probes were freed, or will be, by NumPy's own free
            # while no probe was open: they concern no probe from now on
            self._live.clear()
            self._use("counting")
        # allocations numbered after this one are the probe's (a number no allocation will use)
        counter = _Counter(since=next(self._serial))
        self._open.append(counter)
        counter.previous_handler = self._set_handler(self._capsule)
        return counter

    def close(self, counter: _Counter) -> None:
        self._set_handler(counter.previous_handler)
        counter.previous_handler = None
        self._open.remove(counter)
        if not self._open:
            self._use("forwarding")


_TRACKER = _ArrayTracker()
_NOT_COUNTED = _NotCounted()


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

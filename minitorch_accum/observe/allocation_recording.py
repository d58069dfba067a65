"""Array allocations and frees over time, as the allocator reports them: the memory side of a trace.

On the CPU the events come from the NumPy data-memory tracker of ``observe/memory.py``
(``ArrayAllocationWatch``: every array buffer allocated while the recording is open, and its
free, logged without Python code in the allocator and drained here whenever the trace's span
changes, so each event keeps the span it ran in); on a GPU from a CuPy memory hook (the
pool's mallocs and frees, as they happen). Two depths:

- ``"counter"``: the bytes alive over time, sampled at most every ``resolution`` seconds (each
  sample keeps the peak of its interval), for a counter track over a whole training run;
- ``"frames"``: in addition every event with its address, size and the Python frames that made
  it (the op's ``forward`` or ``backward``, the span it ran in), for PyTorch's memory snapshot
  and the explain figure of one window.

Persistent blocks (the gradient arena, the parameters) exist before a recording opens; the
Accumulator names them in ``persistent`` so that the snapshot can show them.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from minitorch_accum.observe.memory import ArrayAllocationWatch

__all__ = ["AllocationRecording", "Frame"]

Frame = tuple[str, int, str]  # (file, line, function's qualified name)
_SKIPPED = ("observe/memory.py", "observe/allocation_recording.py")
_FRAME_LIMIT = 24


class AllocationRecording:
    """Allocation events relative to a trace's ``origin`` (perf_counter seconds); a context
    manager that records while open (it may be opened again later, adding to what it holds)."""

    def __init__(self, origin: float, keep: str = "counter", resolution: float | None = None) -> None:
        if keep not in ("counter", "frames"):
            raise ValueError(f"memory must be 'counter' or 'frames', got {keep!r}")
        self.origin = origin
        self.keep = keep
        self.resolution = (0.0 if keep == "frames" else 50e-6) if resolution is None else resolution
        self._context = ""
        #: "cpu" or "cuda" (set by the Accumulator from its parameters' device)
        self.device = "cpu"
        #: (seconds, bytes alive) at most one pair per interval of ``resolution``, peaks kept
        self.samples: list[tuple[float, int]] = []
        #: frames only: (seconds, address, +bytes allocated or -bytes freed, frames, context)
        self.events: list[tuple[float, int, int, tuple[Frame, ...], str]] = []
        #: (address, bytes, what it holds) of blocks that existed before the recording
        self.persistent: list[tuple[int, int, str]] = []
        self.alive = 0
        self.peak = 0
        #: whether the allocator reported anything (False on a NumPy without data-memory handlers)
        self.tracked = False
        self._sizes: dict[int, int] = {}
        self._bucket: list[float] | None = None  # [start, peak, last time, last value]
        self._watch: Any = None
        self._files: dict[str, str] = {}

    def name_persistent(self, array: Any, what: str) -> None:
        """Note a block that existed before recording (the arena, a parameter)."""
        address = _address(array)
        if address is not None and array.nbytes:
            self.persistent.append((address, int(array.nbytes), what))

    # --------------------------------------------------------------------- recording
    def __enter__(self) -> AllocationRecording:
        if self._watch is not None:
            raise RuntimeError("this allocation recording is already open")
        frames = self.keep == "frames"
        self._watch = _cupy_watch(self._listen_now) if self.device == "cuda" else ArrayAllocationWatch(frames)
        self._watch.__enter__()
        self.tracked = self.tracked or self._watch.active
        self._sample(time.perf_counter() - self.origin)
        return self

    def __exit__(self, *exc: object) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.__exit__(*exc)
            self._take(watch)
        self._flush()

    @property
    def context(self) -> str:
        """The span the program is in (set by the trace), kept with each event."""
        return self._context

    @context.setter
    def context(self, value: str) -> None:
        self._take(self._watch)  # what was allocated so far ran in the span that ends
        self._context = value

    def _take(self, watch: Any) -> None:
        if isinstance(watch, ArrayAllocationWatch):
            for event in watch.drain():
                self._listen(event.address, event.nbytes, event.seconds - self.origin, event.frames)

    def _listen_now(self, address: int, nbytes: int) -> None:
        # a CuPy hook reports as it happens (device memory, no Python allocator involved)
        frames = tuple(_raw_frames(sys._getframe(1))) if self.keep == "frames" and nbytes > 0 else ()
        self._listen(address, nbytes, time.perf_counter() - self.origin, frames)

    def _listen(self, address: int, nbytes: int, now: float, frames: tuple[tuple[str, int, str], ...]) -> None:
        if nbytes > 0:
            self._sizes[address] = nbytes
        elif self._sizes.pop(address, None) is None:
            return  # a block allocated before the recording
        self.alive += nbytes
        if self.alive > self.peak:
            self.peak = self.alive
        self._sample(now)
        if self.keep == "frames":
            self.events.append((now, address, nbytes, self._named(frames) if nbytes > 0 else (), self._context))

    def _sample(self, now: float) -> None:
        bucket = self._bucket
        if bucket is not None and now - bucket[0] < self.resolution:
            bucket[1] = max(bucket[1], self.alive)
            bucket[2], bucket[3] = now, self.alive
            return
        self._flush()
        self._bucket = [now, self.alive, now, self.alive]

    def _flush(self) -> None:
        bucket, self._bucket = self._bucket, None
        if bucket is None:
            return
        self.samples.append((bucket[0], int(bucket[1])))
        if bucket[3] != bucket[1]:
            self.samples.append((bucket[2], int(bucket[3])))

    def _named(self, raw: tuple[tuple[str, int, str], ...]) -> tuple[Frame, ...]:
        """The allocating frames, innermost first, with short file names, the recorder's own left out."""
        frames = []
        for filename, line, qualname in raw:
            name = self._files.get(filename)
            if name is None:
                name = self._files[filename] = _short_file(filename)
            if not name.endswith(_SKIPPED):
                frames.append((name, line, qualname))
                if len(frames) == _FRAME_LIMIT:
                    break
        return tuple(frames)


def _raw_frames(frame: Any) -> list[tuple[str, int, str]]:
    frames = []
    while frame is not None and len(frames) < 2 * _FRAME_LIMIT:
        frames.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname))
        frame = frame.f_back
    return frames


def _short_file(filename: str) -> str:
    """The package-relative path of one of ours, else the last three parts."""
    normalized = filename.replace("\\", "/")
    marker = normalized.rfind("minitorch_accum/")
    return normalized[marker:] if marker >= 0 else "/".join(normalized.split("/")[-3:])


def _address(array: Any) -> int | None:
    interface = getattr(array, "__array_interface__", None) or getattr(array, "__cuda_array_interface__", None)
    return None if interface is None else int(interface["data"][0])


def _cupy_watch(listener: Any) -> Any:
    from cupy.cuda import memory_hook

    class _AllocationHook(memory_hook.MemoryHook):
        name = "minitorch_accum_allocations"
        active = True

        def malloc_postprocess(self, device_id: int, size: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            listener(mem_ptr, mem_size)

        def free_postprocess(self, device_id: int, mem_size: int, mem_ptr: int, pmem_id: int) -> None:
            listener(mem_ptr, -mem_size)

    return _AllocationHook()

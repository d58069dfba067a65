"""Python face of the native memory counter (csrc/native/memory_counter.cpp).

While a probe is open it counts the bytes of NumPy array buffers allocated through its
data-memory handler and of Python objects (PyMem's MEM and OBJ domains), with no Python
code in any allocation: a signal that arrives during one never runs its handler there.
``minitorch_accum.observe.memory.PeakMemory`` is its user; without the native module these
functions raise RuntimeError (``available()`` says which).
"""

from __future__ import annotations

from typing import Any

from minitorch_accum.kernels.dispatch import native, native_available

__all__ = ["available", "clock_seconds", "close_probe", "close_watch", "counter_state", "counting_handler",
           "drain_watch", "exclude", "open_probe", "open_watch"]


def available() -> bool:
    """Whether the native module, and so the counter, is there."""
    return native_available() and hasattr(native(), "memory_probe_open")


def counting_handler(numpy_handler: object) -> object:
    """The counting data-memory handler as a ``mem_handler`` capsule, forwarding every call to
    ``numpy_handler`` (the capsule of NumPy's default handler)."""
    return native().memory_counting_handler(numpy_handler)


def open_probe(count_objects: bool) -> int:
    """Open a probe (arrays, and Python objects when ``count_objects``); returns its number."""
    return int(native().memory_probe_open(bool(count_objects)))


def close_probe(probe: int) -> tuple[int, int]:
    """Close probe ``probe``: (peak of its arrays alive together, peak of its arrays and objects together)."""
    arrays, total = native().memory_probe_close(int(probe))
    return int(arrays), int(total)


def counter_state() -> dict[str, Any]:
    """Open probes, blocks tracked (0 once none is open) and whether the Python-object hook is in place."""
    return dict(native().memory_counter_state())


def open_watch(frames: bool) -> int:
    """Open the watch (one at a time): a probe of arrays that logs every allocation and free of
    its blocks, with the allocating Python frames when ``frames``; returns its number."""
    return int(native().memory_watch_open(bool(frames)))


def drain_watch() -> list[tuple[float, int, int, tuple[tuple[str, int, str], ...]]]:
    """The watch's events since the last drain: (seconds on ``clock_seconds``'s clock, address,
    +bytes or -bytes, frames innermost first as (file, line, qualified name))."""
    return list(native().memory_watch_drain())


def close_watch(watch: int) -> None:
    """Close the watch (drain it first)."""
    native().memory_watch_close(int(watch))


def clock_seconds() -> float:
    """The steady clock the watch's events are timed by."""
    return float(native().memory_clock_seconds())


def exclude(on: bool) -> None:
    """While on, allocations are left out of every open probe and watch."""
    native().memory_exclude(bool(on))

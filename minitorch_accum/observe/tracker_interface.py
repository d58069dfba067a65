"""What PeakMemory and ArrayAllocationWatch ask of an array tracker, and the event a watch logs.

Two trackers implement it (``array_tracker.py`` chooses one): the native one (C++, no Python
code in any allocation) and the ctypes fallback (``python_array_tracker.py``).
"""

from __future__ import annotations

from types import FrameType
from typing import Any, NamedTuple, Protocol

__all__ = ["AllocationEvent", "ArrayTracker"]


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

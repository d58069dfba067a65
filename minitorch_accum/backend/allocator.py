"""Freed array memory kept for the next micro-batch instead of going back to the OS.

NumPy gets its arrays' memory from the C library's malloc. glibc's malloc hands a freed
block of more than ``M_TRIM_THRESHOLD`` at the top of its heap back to the kernel (and maps
blocks above ``M_MMAP_THRESHOLD`` one by one), so every micro-batch of a window, which
allocates the same activations as the one before, faults all of their pages in again: 4,350
page faults per micro-batch of the char transformer at b = 32 (17 MB), a quarter of its CPU
time (issue 19: 335 ms per window of 8 against 250 ms with the memory kept). Raising both
thresholds keeps freed blocks in the heap, where the next micro-batch's arrays of the same
sizes find them: no page fault, no zeroing by the kernel.

This changes the whole process's malloc, so nothing calls it on import: ``maccum
train/compare/explain`` and the benchmarks do, and a program may (``retain_freed_memory()``).
Arrays larger than ``MMAP_THRESHOLD`` (a large model's weights, the gradient arena) are still
mapped one by one; the memory kept is at most what a micro-batch used at its peak, which the
next one needs again. ``MTA_MALLOC=default`` leaves malloc as it is. glibc only: elsewhere
(macOS, musl) it reports that nothing was changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache
from typing import Any

__all__ = ["MALLOC_ENV", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "retain_freed_memory", "retained_memory"]

MALLOC_ENV = "MTA_MALLOC"
#: blocks up to this size come from the heap and are reused there (glibc's own dynamic limit)
MMAP_THRESHOLD = 32 << 20
#: free memory at the top of the heap kept before any is handed back
TRIM_THRESHOLD = 1 << 30

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_applied: str | None = None


@cache
def _glibc() -> Any:
    if os.name != "posix":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def retain_freed_memory() -> str:
    """Keep freed blocks of up to MMAP_THRESHOLD in the heap for the next micro-batch (see the
    module's docstring); returns what was done, for a header line. Idempotent."""
    global _applied
    if os.environ.get(MALLOC_ENV, "").strip().lower() == "default":
        return f"malloc as it is ({MALLOC_ENV}=default)"
    if _applied is not None:
        return _applied
    libc = _glibc()
    if libc is None:
        return "malloc as it is (not glibc)"
    if not (libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "malloc as it is (mallopt refused)"
    _applied = (f"freed memory kept for reuse (glibc malloc: blocks up to {MMAP_THRESHOLD >> 20} MiB from the heap, "
                f"trimmed past {TRIM_THRESHOLD >> 30} GiB)")
    return _applied


def retained_memory() -> str:
    """What ``retain_freed_memory`` did in this process (``malloc as it is`` before it ran)."""
    return _applied or "malloc as it is"

"""The native kernels' threads: how many of its pool's threads a parallel pass uses.

The pool (csrc/native/thread_pool.cpp) is sized once, when its first parallel pass starts:
``MTA_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs this process may run on.
``set_native_threads`` caps the threads a pass uses from then on (1: every pass on the calling
thread), up to that size; ``minitorch_accum.backend.set_threads`` calls it with the count it
gives the BLAS libraries too. Without the native module both are no-ops that say None.
"""

from __future__ import annotations

from types import ModuleType

from minitorch_accum.kernels.dispatch import native, native_available

__all__ = ["native_threads", "set_native_threads"]


def set_native_threads(threads: int) -> None:
    """Let a parallel pass use ``threads`` threads, the caller included (0: the pool's size)."""
    if threads < 0:
        raise ValueError(f"set_native_threads: threads must be >= 0, got {threads}")
    module = _pool()
    if module is not None:
        module.set_threads(int(threads))


def native_threads() -> int | None:
    """Threads a parallel pass of the native kernels uses now (None without the native module)."""
    module = _pool()
    return None if module is None else int(module.threads())


def _pool() -> ModuleType | None:
    """The native module when it is built with the pool's controls (a module built before them has none)."""
    if not native_available():
        return None
    module = native()
    return module if hasattr(module, "set_threads") else None

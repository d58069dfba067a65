"""How many threads the CPU libraries use, decided in one place.

Four pools compute for a training step on the CPU: NumPy's bundled OpenBLAS (every matmul),
SciPy's own OpenBLAS (the fallback beta = 1 GEMM), the native kernels' pool
(csrc/native/thread_pool.cpp: accumulation, norms, optimizer steps) and, when PyTorch is loaded
(the benchmarks' twin), its OpenMP pool. Left alone, each takes every core; on a machine another
process keeps busy, a BLAS thread then waits a scheduler slice at every barrier (measured in
issue 19: ``maccum explain`` took 4-6 s with one BLAS thread and 5-40 s with the default two
while another process held a core). ``set_threads`` gives them all the same count:

- ``set_threads(n)``: n threads from now on (``n=None``: the default below);
- ``MTA_THREADS=n`` in the environment: the default is n;
- without it, the default is the CPUs this process may run on less the 1-minute load average
  (rounded), at least 1: every core of an idle machine, one on a busy one;
- ``maccum train/compare/explain --threads N`` calls ``set_threads(N)``, every benchmark
  prints ``thread_summary()`` in its header.

With the native module the GEMMs go through the native module too (``backend/blas.py``: each a
single-threaded call of NumPy's OpenBLAS, a weight gradient's on a pool helper while backward
goes on), and the BLAS libraries are then given one thread: one pool runs the GEMMs and the
fused kernels, instead of two whose idle workers spin on the core the other needs (issue 27). ``MTA_GEMM=ctypes``
keeps OpenBLAS threading its own GEMMs, with the count.

The native pool is sized once (``MTA_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs)
when it first runs; ``set_threads`` caps how many of its threads a pass uses, up to that size.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from minitorch_accum import kernels

__all__ = ["THREADS_ENV", "ThreadSettings", "available_cpus", "default_threads", "set_threads", "thread_settings",
           "thread_summary"]

THREADS_ENV = "MTA_THREADS"


@dataclass(frozen=True)
class ThreadSettings:
    """What each pool uses now: ``requested`` is the count ``set_threads`` last gave (None before),
    ``blas`` maps each loaded BLAS or OpenMP library (its file's name) to its threads, ``native``
    is the kernels' pool (None without the native module), ``torch`` PyTorch's (None unless loaded)."""

    requested: int | None
    source: str
    blas: dict[str, int]
    native: int | None
    torch: int | None
    gemm: str = "BLAS"  # who splits the GEMMs: "native pool" or "BLAS"

    def summary(self) -> str:
        blas = ", ".join(f"{name} {n}" for name, n in sorted(self.blas.items())) or "none loaded"
        parts = [f"threads {self.requested if self.requested is not None else '?'} ({self.source})",
                 f"BLAS/OpenMP: {blas}", f"native pool {self.native if self.native is not None else 'n/a'}",
                 f"GEMMs on the {self.gemm}"]
        if self.torch is not None:
            parts.append(f"torch {self.torch}")
        return "; ".join(parts)


_requested: int | None = None
_source = "not set: each library's own default"


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_threads() -> tuple[int, str]:
    """(threads, why): ``MTA_THREADS`` when set, else the free CPUs by the load average."""
    raw = os.environ.get(THREADS_ENV)
    if raw is not None and raw.strip():
        return _positive(raw.strip(), THREADS_ENV), f"{THREADS_ENV}={raw.strip()}"
    cpus = available_cpus()
    try:
        load = os.getloadavg()[0]
    except OSError:
        return cpus, f"all {cpus} CPUs (no load average here)"
    free = max(1, min(cpus, cpus - round(load)))
    return free, f"default: {cpus} CPUs, load {load:.2f}"


def _positive(value: Any, name: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number of threads, got {value!r}") from None
    if isinstance(value, bool) or n < 1 or str(n) != str(value).strip():
        raise ValueError(f"{name} must be a positive number of threads, got {value!r}")
    return n


def set_threads(threads: int | None = None) -> ThreadSettings:
    """Give every loaded pool ``threads`` threads (None: ``default_threads()``); returns what
    each uses now. Libraries loaded later (torch imported afterwards) keep their own count until
    the next call."""
    global _requested, _source
    if threads is None:
        threads, source = default_threads()
    elif isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"set_threads: threads must be a positive int (or None for the default), got {threads!r}")
    else:
        source = "set by the caller"
    from threadpoolctl import threadpool_limits

    from minitorch_accum.backend.blas import native_gemm

    # NumPy's and SciPy's OpenBLAS and any OpenMP runtime loaded; one BLAS thread when the native
    # pool splits the GEMMs (each of its threads calls the BLAS)
    threadpool_limits(limits=threads, user_api="openmp")
    threadpool_limits(limits=1 if native_gemm() is not None else threads, user_api="blas")
    kernels.set_native_threads(threads)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(threads)
    _requested, _source = threads, source
    return thread_settings()


def thread_settings() -> ThreadSettings:
    """What each pool uses now (see ThreadSettings)."""
    from threadpoolctl import threadpool_info

    from minitorch_accum.backend.blas import native_gemm

    blas = {_pool_name(info): int(info["num_threads"]) for info in threadpool_info()}
    torch = sys.modules.get("torch")
    return ThreadSettings(_requested, _source, blas, kernels.native_threads(),
                          torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else None,
                          "native pool" if native_gemm() is not None else "BLAS")


def _pool_name(info: dict[str, Any]) -> str:
    """``numpy openblas``, ``scipy openblas``, ``torch openmp``: who ships the library, and which."""
    path = str(info.get("filepath", ""))
    owner = next((name for name in ("numpy", "scipy", "torch", "sklearn") if f"{os.sep}{name}" in path), None)
    api = str(info.get("internal_api", info.get("prefix", "?")))
    return f"{owner} {api}" if owner else os.path.basename(path) or api


def thread_summary() -> str:
    """One line for a benchmark's or a command's header: the count, why, and each pool's."""
    return thread_settings().summary()

"""Where each millisecond of our micro-batch goes: GEMMs, the fused layer kernels, the bias
row kernels, the accumulation and optimizer kernels, and everything else (the engine's and the
ops' Python, NumPy's elementwise calls and reductions).

Timers wrap the calls themselves for a few micro-batches, in the side's own process after its
timed windows: ``numpy.matmul``, the NumPy Backend's ``matmul``, ``batched_matmul`` (attention's
stacked products) and ``gemm_into`` (a weight gradient written into the arena by the GEMM), the
native GEMM entry points (``gemm``, ``gemm_start``, ``gemm_finish``: the wait for a background
product, ``stacked_gemm``), the bias kernels (``add_row_vector``, ``sum_rows``), and every
function of the native module in the kernel catalog, sorted by its row. Only the outermost timed
call counts: the Backend's ``matmul`` runs the native ``gemm``, and counting both would count
its time twice. A wrapper costs well under a microsecond per call, against ~100 calls per
micro-batch; "the rest" is the wall time of the micro-batches less the timed calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["CATEGORIES", "ours_breakdown"]

CATEGORIES = ("gemm", "fused layer kernels", "bias row kernels", "accumulation and optimizer kernels",
              "rest: Python and NumPy")

#: native functions outside the kernel catalog, by category (the catalog's rows sort the others)
NATIVE_OUTSIDE_CATALOG = {"gemm": "gemm", "gemm_start": "gemm", "gemm_finish": "gemm", "stacked_gemm": "gemm",
                          "add_row_vector": "bias row kernels", "sum_rows": "bias row kernels"}


def _timed(function: Callable[..., Any], totals: dict[str, list[float]], category: str,
           depth: list[int]) -> Callable[..., Any]:
    """``function`` timed into ``totals[category]`` when no other timed call is running
    (``depth``, shared by every timer of one breakdown, counts the timed calls under way)."""

    def timed(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:  # inside another timed call, which counts this time
            return function(*args, **kwargs)
        depth[0] += 1
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent = totals[category]
            spent[0] += time.perf_counter() - start
            spent[1] += time.thread_time() - cpu
            depth[0] -= 1

    return timed


@contextmanager
def _timers(totals: dict[str, list[float]]) -> Iterator[None]:
    import numpy as np

    from minitorch_accum.backend.numpy_backend import NumpyBackend
    from minitorch_accum.kernels.catalog import CATALOG, FUSED
    from minitorch_accum.kernels.dispatch import host_module

    module = host_module()
    depth = [0]
    saved: list[tuple[Any, str, Any]] = [(np, "matmul", np.matmul)]
    np.matmul = _timed(np.matmul, totals, "gemm", depth)
    # the ops' 2-D products, attention's stacks and the fused weight gradients
    for method in ("matmul", "batched_matmul", "gemm_into"):
        saved.append((NumpyBackend, method, getattr(NumpyBackend, method)))
        setattr(NumpyBackend, method, _timed(getattr(NumpyBackend, method), totals, "gemm", depth))
    if module is not None:
        categories = dict(NATIVE_OUTSIDE_CATALOG)
        for kernel in CATALOG:
            categories[kernel.name] = ("fused layer kernels" if kernel.family == FUSED
                                       else "accumulation and optimizer kernels")
        for name, category in categories.items():
            function = getattr(module, name, None)
            if function is not None:
                saved.append((module, name, function))
                setattr(module, name, _timed(function, totals, category, depth))
    try:
        yield
    finally:
        for owner, name, function in saved:
            setattr(owner, name, function)


def ours_breakdown(run: Callable[[], None], calls: int, micro_batches_per_call: int = 1) -> dict[str, Any]:
    """Milliseconds per micro-batch by category over ``calls`` calls of ``run``, each
    ``micro_batches_per_call`` micro-batches (a window: its close and step are shared out):
    ``ms_per_micro_batch`` by the wall clock, ``thread_cpu_ms_per_micro_batch`` by the calling
    thread's CPU time (which another process's load moves less; a BLAS or pool helper's work
    is not in it)."""
    totals = {name: [0.0, 0.0] for name in CATEGORIES[:-1]}
    with _timers(totals):
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            run()
        wall, cpu = time.perf_counter() - start, time.thread_time() - cpu
    count = calls * micro_batches_per_call
    ms = {name: spent[0] / count * 1e3 for name, spent in totals.items()}
    ms[CATEGORIES[-1]] = wall / count * 1e3 - sum(ms.values())
    cpu_ms = {name: spent[1] / count * 1e3 for name, spent in totals.items()}
    cpu_ms[CATEGORIES[-1]] = cpu / count * 1e3 - sum(cpu_ms.values())
    return {"ms_per_micro_batch": ms, "thread_cpu_ms_per_micro_batch": cpu_ms, "total_ms": wall / count * 1e3,
            "thread_cpu_ms": cpu / count * 1e3, "micro_batches": count}

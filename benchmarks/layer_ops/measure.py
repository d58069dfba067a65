"""Timing the op-level cases: every variant of a case interleaved, medians per call, and the
ratios ours / PyTorch (forward, backward, and both) from the medians of one run."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from benchmarks.harness import Log, import_torch, loadavg, machine_info, median, native_simd, time_interleaved
from benchmarks.layer_ops.cases import Case, fused_cases, gemm_cases
from benchmarks.layer_ops.settings import TARGET_RATIO, Settings

__all__ = ["BENCHMARK", "measure"]

BENCHMARK = "layer_ops"


def _ratio(medians: dict[str, float], ours: list[str], theirs: list[str]) -> float | None:
    if not all(name in medians for name in ours + theirs):
        return None
    return sum(medians[n] for n in ours) / sum(medians[n] for n in theirs)


def _case_record(case: Case, samples: dict[str, list[float]]) -> dict[str, Any]:
    medians = {name: median(values) for name, values in samples.items()}
    ratios = {}
    for direction in ("forward", "backward"):
        ratios[direction] = _ratio(medians, [f"ours_{direction}"], [f"torch_{direction}"])
        ratios[f"{direction}_vs_numpy"] = _ratio(medians, [f"ours_{direction}"], [f"numpy_{direction}"])
    ratios["both"] = _ratio(medians, ["ours_forward", "ours_backward"], ["torch_forward", "torch_backward"])
    ratios["gemm"] = _ratio(medians, ["ours_gemm"], ["torch_addmm"])
    ratios["gemm_k256"] = _ratio(medians, ["ours_k256"], ["torch_addmm"])
    ratios["k256_over_backend"] = _ratio(medians, ["ours_k256"], ["ours_gemm"])
    record: dict[str, Any] = {
        "case": case.name, "shape": case.shape,
        "median_ms": {name: 1e3 * m for name, m in medians.items()},
        "ratios": {k: v for k, v in ratios.items() if v is not None},
    }
    if case.target:
        both = ratios["both"] if ratios["both"] is not None else ratios["backward"]
        record["target"] = {"ours_over_torch_max": TARGET_RATIO, "met": both is not None and both <= TARGET_RATIO}
    return record


def _pin_threads(settings: Settings, torch: Any) -> Any:
    """Every pool to settings.threads: the native one (it reads MTA_NUM_THREADS at its first
    parallel call: in the program's own process, before any kernel ran), NumPy's and SciPy's
    BLAS, PyTorch's. Returns the BLAS limits, to be undone."""
    os.environ["MTA_NUM_THREADS"] = str(settings.threads)
    if torch is not None:
        torch.module.set_num_threads(settings.threads)
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=settings.threads)


def measure(settings: Settings, log: Log) -> dict[str, Any]:
    torch = import_torch(settings.device, match_spin=True)
    saved_threads = os.environ.get("MTA_NUM_THREADS")
    torch_threads = torch.module.get_num_threads() if torch is not None else None
    pinned = _pin_threads(settings, torch)
    # as the commands and the end-to-end benchmarks run ours: freed blocks kept for the next
    # call (a fresh 1 MiB output otherwise costs ~100 us of page faults; PyTorch's allocator
    # caches its blocks the same way)
    from minitorch_accum.backend import retain_freed_memory

    memory = retain_freed_memory()
    load_before = loadavg()
    cases = []
    try:
        for case in fused_cases(settings, torch and torch.module):
            log(f"{case.name} ({case.shape})")
            samples = time_interleaved(case.variants, settings.repeats, settings.warmup)
            cases.append(_case_record(case, samples))
        for case in gemm_cases(settings, torch and torch.module):
            log(f"{case.name} ({case.shape})")
            samples = time_interleaved(case.variants, settings.gemm_repeats, 1)
            cases.append(_case_record(case, samples))
        threads = {"MTA_NUM_THREADS": os.environ.get("MTA_NUM_THREADS"),
                   "torch": torch.module.get_num_threads() if torch is not None else None,
                   "blas": settings.threads, "native_simd": native_simd()}
    finally:
        pinned.unregister()
        if saved_threads is None:
            os.environ.pop("MTA_NUM_THREADS", None)
        else:
            os.environ["MTA_NUM_THREADS"] = saved_threads
        if torch_threads is not None:
            torch.module.set_num_threads(torch_threads)
    targets = [c for c in cases if "target" in c]
    record = asdict(settings)
    record["threads_in_effect"] = threads
    record["memory"] = memory
    return {
        "benchmark": BENCHMARK,
        "machine": machine_info(),
        "load_average": {"before": load_before, "after": loadavg()},
        "settings": record,
        "torch": None if torch is None else {"version": torch.module.__version__,
                                             "gomp_spincount": torch.gomp_spincount},
        "cases": cases,
        "all_targets_met": bool(targets) and all(c["target"]["met"] for c in targets),
    }

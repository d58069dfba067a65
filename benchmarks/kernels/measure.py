"""Timing the kernel benchmark's cases: every variant of a case interleaved after warm-up
rounds, medians per call, GB/s from useful bytes, the limit line from the best copy or
triad of the same case (in bus bytes), and the ratios of medians from one run.

Small sizes run a call several times per sample so a sample is long enough to time.
NumPy's two-op ``acc += s*g`` really moves more (its temporary is written and read back)
but is charged the same 12 B so that GB/s compare as speed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from benchmarks.harness.machine import machine_info
from benchmarks.harness.program import Log
from benchmarks.harness.timing import median, time_interleaved
from benchmarks.harness.torch_import import import_torch
from benchmarks.kernels.arrays import DeviceArrays
from benchmarks.kernels.cases import Case, flat_case, model_case, size_name
from benchmarks.kernels.settings import Settings, settings_record
from benchmarks.kernels.targets import targets
from benchmarks.kernels.variants import Variant, variant_path

__all__ = ["BENCHMARK", "measure", "measure_case"]

BENCHMARK = "kernels"


def measure(settings: Settings, log: Log) -> dict[str, Any]:
    """Measure every case of ``settings``; return the payload of the result file."""
    log(f"{'quick' if settings.quick else 'full'} mode on {settings.device}, "
        f"{len(settings.sizes)} sizes + model-shaped list")
    started = time.perf_counter()
    torch = import_torch(settings.device, settings.match_torch_spin)
    arrays = DeviceArrays(settings.device, torch)
    jobs: list[tuple[str, Callable[[], Case], int]] = [
        (f"n = {size_name(n)}", (lambda n=n: flat_case(arrays, n)), settings.repeats_for(n)) for n in settings.sizes
    ]
    jobs.append(("model-shaped list", lambda: model_case(arrays, settings.model_divisor), settings.model_repeats))
    cases: list[dict[str, Any]] = []
    for title, build, repeats in jobs:
        case_started = time.perf_counter()
        variants, info = build()
        case = measure_case(arrays, variants, info, repeats, settings.warmup, settings.min_sample_bytes)
        del variants  # the case's arrays go before the next, larger one is allocated
        arrays.free_cached()
        if settings.device == "cuda":
            # the GPU target's limit is the D2D copy itself (CuPy copyto or cudaMemcpy)
            d2d = max(case["variants"][name]["gb_per_s"] for name in ("copy_array_library", "copy_memcpy"))
            case["limit"]["d2d_copy_gb_per_s"] = d2d
            case["ratios"]["arena_fraction_of_copy"] = case["variants"]["native_arena"]["gb_per_s"] / d2d
        cases.append(case)
        log(
            f"  {title:<18} {len(case['variants']):>2} variants x {repeats} rounds "
            f"(x{case['inner_calls_per_sample']} calls/sample)  {time.perf_counter() - case_started:6.1f} s"
        )
    payload: dict[str, Any] = {
        "benchmark": BENCHMARK,
        "machine": machine_info(),
        "settings": settings_record(settings, torch, arrays.mixed_path),
        "cases": cases,
        "targets": targets(settings.device, cases, settings.target_min_elements),
        "seconds": time.perf_counter() - started,
    }
    payload["all_targets_met"] = all(t["met"] for t in payload["targets"] if t["met"] is not None)
    return payload


def measure_case(
    arrays: DeviceArrays, variants: list[Variant], info: dict[str, Any], repeats: int, warmup: int,
    min_sample_bytes: int
) -> dict[str, Any]:
    """One case's figures: per-variant medians, GB/s and fractions of the limit, the limit, the ratios."""
    elements = int(info["elements"])
    # one loop count for every variant of a case, so all see the same cache state per sample
    inner = max(1, math.ceil(min_sample_bytes / (12 * elements)))

    def looped(fn: Callable[[], Any]) -> Callable[[], Any]:
        if inner == 1:
            return fn

        def run() -> None:
            for _ in range(inner):
                fn()

        return run

    samples = time_interleaved(
        {v.name: looped(v.run) for v in variants},
        repeats=repeats,
        warmup=warmup,
        sync=None if arrays.on_host else arrays.synchronize,
        timer=arrays.timer(),
    )
    figures: dict[str, Any] = {}
    for v in variants:
        per_call = [t / inner for t in samples[v.name]]
        seconds = median(per_call)
        # write-allocate reads happen on a CPU's caches only
        bus_bytes = v.bytes_per_element + (v.extra_bus_bytes if arrays.on_host else 0)
        figures[v.name] = {
            "label": v.label,
            "path": variant_path(v.name, arrays.on_host),
            "role": v.role,
            "bytes_per_element": v.bytes_per_element,
            "median_s": seconds,
            "gb_per_s": v.bytes_per_element * elements / seconds / 1e9,
            "bus_bytes_per_element": bus_bytes,
            "bus_gb_per_s": bus_bytes * elements / seconds / 1e9,
            "samples_s": per_call,
        }
        if v.note:
            figures[v.name]["note"] = v.note
    best = {
        role: max(
            ((n, f["bus_gb_per_s"]) for n, f in figures.items() if f["role"] == role),
            key=lambda item: item[1],
            default=(None, math.nan),
        )
        for role in ("copy", "triad")
    }
    limit = max(best["copy"][1], best["triad"][1])
    for f in figures.values():
        f["fraction_of_copy"] = f["bus_gb_per_s"] / best["copy"][1]
        f["fraction_of_triad"] = f["bus_gb_per_s"] / best["triad"][1] if best["triad"][0] else None
        f["fraction_of_limit"] = f["bus_gb_per_s"] / limit
    case = dict(info)
    case.update(
        inner_calls_per_sample=inner,
        repeats=repeats,
        warmup=warmup,
        variants=figures,
        limit={
            "copy_variant": best["copy"][0],
            "copy_gb_per_s": best["copy"][1],
            "triad_variant": best["triad"][0],
            "triad_gb_per_s": best["triad"][1] if best["triad"][0] else None,
            "gb_per_s": limit,
        },
        ratios=_ratios(figures),
    )
    return case


def _ratio(figures: dict[str, Any], slow: str, fast: str) -> float | None:
    """How many times faster ``fast`` ran than ``slow`` (a ratio of medians from one run)."""
    if slow not in figures or fast not in figures:
        return None
    return figures[slow]["median_s"] / figures[fast]["median_s"]


def _share(figures: dict[str, Any], variant: str, of: str) -> float | None:
    """``variant``'s GB/s (useful bytes) as a share of ``of``'s, from one run."""
    if variant not in figures or of not in figures:
        return None
    return figures[variant]["gb_per_s"] / figures[of]["gb_per_s"]


def _ratios(figures: dict[str, Any]) -> dict[str, float | None]:
    ratios = {
        "arena_vs_numpy_naive": _ratio(figures, "numpy_naive", "native_arena"),
        "arena_vs_numpy_out": _ratio(figures, "numpy_out", "native_arena"),
        "arena_vs_torch_foreach": _ratio(figures, "torch_foreach", "native_arena"),
        "arena_vs_torch_flat": _ratio(figures, "torch_flat", "native_arena"),
        "cast_add_scale_vs_torch_mixed": _ratio(figures, "torch_mixed", "native_cast_add_scale"),
        "multi_vs_per_tensor": _ratio(figures, "native_per_tensor", "native_multi"),
        "multi_vs_torch_foreach": _ratio(figures, "torch_foreach", "native_multi"),
        "multi_cast_add_scale_vs_torch_mixed": _ratio(figures, "torch_mixed", "native_multi_cast_add_scale"),
        "arena_fraction_of_limit": figures["native_arena"]["fraction_of_limit"] if "native_arena" in figures else None,
        # into a bfloat16 buffer: GB/s (useful bytes) as a share of the float32 kernel's, and of the one
        # rounding to nearest (the stochastic kernels' random bits must not make them compute-bound)
        "add_scale_stochastic_share_of_fp32": _share(figures, "native_add_scale_stochastic", "native_arena"),
        "add_scale_stochastic_share_of_bf16_nearest": _share(figures, "native_add_scale_stochastic",
                                                             "native_add_scale_bf16"),
        "add_scale_bf16_share_of_fp32": _share(figures, "native_add_scale_bf16", "native_arena"),
        "copy_scale_stochastic_share_of_fp32": _share(figures, "native_copy_scale_stochastic", "native_copy_scale"),
        "cast_add_scale_stochastic_share_of_fp32": _share(figures, "native_cast_add_scale_stochastic",
                                                          "native_cast_add_scale"),
        "multi_stochastic_share_of_fp32": _share(figures, "native_multi_add_scale_stochastic", "native_multi"),
    }
    return {name: value for name, value in ratios.items() if value is not None}

"""The issues' targets for the kernels (issue 7, kernel half; issue 29, stochastic rounding), each
judged on one ratio of a case measured in the run: the figure, the threshold, met or not."""

from __future__ import annotations

from typing import Any

__all__ = ["targets"]

CPU_TARGET_MIN_ELEMENTS = 1 << 22
CPU_VS_NUMPY = 1.3  # arena add_scale >= 1.3x NumPy `acc += s*g`
CPU_VS_TORCH_FOREACH = 0.95  # arena add_scale >= 0.95x torch._foreach_add_
CPU_FRACTION_OF_LIMIT = 0.80  # arena add_scale >= 80% of the measured copy/triad bandwidth
CPU_CAST_VS_TORCH_MIXED = 1.5  # cast_add_scale (bf16 into fp32) >= 1.5x PyTorch's mixed-dtype path
STOCHASTIC_SHARE_OF_FP32 = 0.80  # add_scale_stochastic into bf16 >= 80% of fp32 add_scale's GB/s (issue 29)
GPU_TARGET_MIN_ELEMENTS = 1 << 26
GPU_FRACTION_OF_COPY = 0.85  # arena add_scale >= 85% of the measured D2D copy bandwidth
GPU_MULTI_VS_TORCH_FOREACH = 1.1  # model-shaped multi-tensor launch >= 1.1x torch._foreach_add_

# (target, ratio it is judged on, threshold) for every CPU case large enough
_CPU_TARGETS = (
    (f"arena add_scale >= {CPU_VS_NUMPY}x NumPy acc += s*g", "arena_vs_numpy_naive", CPU_VS_NUMPY),
    (f"arena add_scale >= {CPU_VS_TORCH_FOREACH}x torch._foreach_add_", "arena_vs_torch_foreach",
     CPU_VS_TORCH_FOREACH),
    (f"arena add_scale >= {CPU_FRACTION_OF_LIMIT:.0%} of measured copy/triad bandwidth", "arena_fraction_of_limit",
     CPU_FRACTION_OF_LIMIT),
    (f"cast_add_scale (bf16 into fp32) >= {CPU_CAST_VS_TORCH_MIXED}x PyTorch mixed-dtype path",
     "cast_add_scale_vs_torch_mixed", CPU_CAST_VS_TORCH_MIXED),
    (f"add_scale_stochastic (into bf16) >= {STOCHASTIC_SHARE_OF_FP32:.0%} of fp32 add_scale's GB/s",
     "add_scale_stochastic_share_of_fp32", STOCHASTIC_SHARE_OF_FP32),
)


def _target(name: str, case: dict[str, Any], key: str, threshold: float) -> dict[str, Any]:
    measured = case["ratios"].get(key)
    return {
        "target": name,
        "case": case["case"],
        "elements": case["elements"],
        "threshold": threshold,
        "measured": measured,
        "met": None if measured is None else bool(measured >= threshold),
    }


def targets(device: str, cases: list[dict[str, Any]], min_elements: int | None) -> list[dict[str, Any]]:
    """Every target for every case it applies to (cases of at least ``min_elements``; None: the issue's)."""
    rows: list[dict[str, Any]] = []
    if device == "cpu":
        smallest = CPU_TARGET_MIN_ELEMENTS if min_elements is None else min_elements
        for case in cases:
            if case["elements"] >= smallest:
                rows += [_target(name, case, key, threshold) for name, key, threshold in _CPU_TARGETS]
        return rows
    smallest = GPU_TARGET_MIN_ELEMENTS if min_elements is None else min_elements
    for case in cases:
        if case["case"] != "model" and case["elements"] >= smallest:
            rows.append(_target(f"arena add_scale >= {GPU_FRACTION_OF_COPY:.0%} of measured D2D copy bandwidth",
                                case, "arena_fraction_of_copy", GPU_FRACTION_OF_COPY))
        if case["case"] == "model":
            rows.append(_target(
                f"model-shaped multi_add_scale >= {GPU_MULTI_VS_TORCH_FOREACH}x torch._foreach_add_ (CUDA)",
                case, "multi_vs_torch_foreach", GPU_MULTI_VS_TORCH_FOREACH))
    return rows

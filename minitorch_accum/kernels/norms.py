"""Global L2 norm, for clipping by global norm.

Per-thread sums of squares are fp32 for fp32/fp16/bf16 arrays and fp64 for
fp64 arrays; block partial sums, the final reduce and the square root are
fp64. The result may differ from the NumPy reference (an fp64 dot product) by
rounding: summation order differs, the only kernels where it may.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dispatch import cpu_path, native, one_device
from minitorch_accum.kernels.launch_plan import plan_l2_norm
from minitorch_accum.kernels.runners import runner_for
from minitorch_accum.kernels.validation import check_lengths, check_norm_input

__all__ = ["l2_norm", "multi_l2_norm"]

Array = Any


def _norm(kernel: str, tensors: Sequence[Array], roles: Sequence[str]) -> float:
    if all(type(x) is np.ndarray for x in tensors):
        device = "host"
    else:
        device = one_device(kernel, zip(roles, tensors, strict=True))
    if device == "host":
        path = cpu_path()
        if path == "native":
            return native().l2_norm(tensors[0]) if kernel == "l2_norm" else native().multi_l2_norm(tensors)
        if path == "reference":
            return reference.l2_norm(tensors[0]) if kernel == "l2_norm" else reference.multi_l2_norm(tensors)
    for role, x in zip(roles, tensors, strict=True):
        check_norm_input(kernel, role, x)
    runner = runner_for(device)
    launches, out = plan_l2_norm(tensors, runner.address_of, runner.empty_f64)
    if out is None:
        return 0.0
    runner.run(launches)
    return math.sqrt(float(runner.to_host(out)[0]))


def l2_norm(x: Array) -> float:
    """Euclidean norm of all elements of x (float32, float16, bfloat16 or float64), as a float."""
    return _norm("l2_norm", [x], ["x"])


def multi_l2_norm(tensors: Sequence[Array]) -> float:
    """Global Euclidean norm of all elements of a list of arrays, as a float (4 B/elem fp32)."""
    check_lengths("multi_l2_norm", [("tensors", tensors)])
    return _norm("multi_l2_norm", tensors, [f"tensors[{i}]" for i in range(len(tensors))])

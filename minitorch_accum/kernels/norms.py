"""Global L2 norm, for clipping by global norm.

Every path sums squares in fp64, whatever the arrays' dtype (block partial
sums, the final reduce and the square root too), so the norm of large fp32
values (1e20 and up) stays finite; fp64 arrays whose squares would overflow or
underflow are summed again scaled by a power of two (``l2_scaling``). The
result may differ from the NumPy reference by rounding: summation order
differs, the only kernels where it may.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitorch_accum.kernels import l2_scaling
from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.catalog import kernel_info
from minitorch_accum.kernels.dispatch import call_device, host_module
from minitorch_accum.kernels.launch.plan import plan_l2_norm
from minitorch_accum.kernels.launch.runners import Runner, runner_for
from minitorch_accum.kernels.validation import check_norm

__all__ = ["l2_norm", "multi_l2_norm"]

def _device_sums(runner: Runner, tensors: Sequence[Array], scale: float) -> tuple[float, float]:
    """(sum of (scale * x)^2, max |scale * x|) over every element, reduced on the device."""
    launches, out = plan_l2_norm(tensors, scale, runner.address_of, runner.empty_f64)
    if out is None:
        return 0.0, 0.0
    runner.run(launches)
    total, largest = (float(v) for v in runner.to_host(out))
    return total, largest


def _norm(kernel: str, tensors: Array | Sequence[Array]) -> float:
    listed = kernel_info(kernel).listed
    device = call_device(kernel, ("tensor",) if listed else ("x",), (tensors,), listed=listed)
    if device == "host" and (module := host_module()) is not None:
        return float(getattr(module, kernel)(tensors))
    xs = check_norm(kernel, tensors, listed=listed)
    runner = runner_for(device)
    return l2_scaling.norm_from_sums(lambda scale: _device_sums(runner, xs, scale))


def l2_norm(x: Array) -> float:
    """Euclidean norm of all elements of x (float32, float16, bfloat16 or float64), as a float (4 B/elem fp32)."""
    return _norm("l2_norm", x)


def multi_l2_norm(tensors: Sequence[Array]) -> float:
    """Global Euclidean norm of all elements of a list of arrays, as a float (4 B/elem fp32)."""
    return _norm("multi_l2_norm", tensors)

"""The CUDA path: the .cu files compiled by NVRTC through cupy.RawModule.

Each source file is compiled once per process and device (CuPy also keeps
the binary in its on-disk cache), with --fmad=false so the GPU rounds exactly
as the NumPy reference does. CuPy is imported only when a CuPy array is seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.catalog import source_of
from minitorch_accum.kernels.launch.plan import ByValue, Launch
from minitorch_accum.kernels.sources import csrc_dir, source_text

__all__ = ["NVRTC_OPTIONS", "address_of", "empty_f64", "function", "run", "sm_count"]

NVRTC_OPTIONS: tuple[str, ...] = ("--std=c++17", "--fmad=false")

_modules: dict[tuple[int, str], Any] = {}
_functions: dict[tuple[int, str], Any] = {}
_sm_counts: dict[int, int] = {}


def _cupy() -> Any:
    import cupy

    return cupy


def function(kernel: str, device_id: int) -> Any:
    """The compiled kernel on a device (cupy RawModule function), memoized."""
    key = (device_id, kernel)
    fn = _functions.get(key)
    if fn is None:
        cupy = _cupy()
        source = source_of(kernel)
        module = _modules.get((device_id, source))
        if module is None:
            with cupy.cuda.Device(device_id):
                module = cupy.RawModule(code=source_text(csrc_dir() / source), options=NVRTC_OPTIONS)
            _modules[(device_id, source)] = module
        with cupy.cuda.Device(device_id):
            fn = module.get_function(kernel)
        _functions[key] = fn
    return fn


def sm_count(device_id: int) -> int:
    count = _sm_counts.get(device_id)
    if count is None:
        count = int(_cupy().cuda.Device(device_id).attributes["MultiProcessorCount"])
        _sm_counts[device_id] = count
    return count


def address_of(x: Array) -> int:
    return int(x.data.ptr)


def empty_f64(n: int, device_id: int) -> Array:
    cupy = _cupy()
    with cupy.cuda.Device(device_id):
        return cupy.empty(n, dtype=np.float64)


def _argument(x: Any) -> Any:
    if x is None:
        return np.uint64(0)  # NULL, 8 bytes: safe on every CuPy version
    if isinstance(x, ByValue):
        return x.array  # a size-1 NumPy array: CuPy passes its bytes by value
    return x


def run(launches: Iterable[Launch], device_id: int) -> None:
    """Launch a plan of launch_plan.py on a device, on its current stream."""
    cupy = _cupy()
    with cupy.cuda.Device(device_id):
        for step in launches:
            function(step.kernel, device_id)(step.grid, step.block, tuple(_argument(a) for a in step.args))

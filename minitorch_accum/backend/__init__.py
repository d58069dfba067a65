"""Backends: where arrays live and which library computes on them (lowest layer above kernels)."""

from __future__ import annotations

from functools import cache

from minitorch_accum.backend.allocator import MALLOC_ENV, retain_freed_memory, retained_memory
from minitorch_accum.backend.base import Backend
from minitorch_accum.backend.cupy_backend import cuda_available
from minitorch_accum.backend.device import Device, DeviceLike, parse_device
from minitorch_accum.backend.dtypes import (
    FLOAT_DTYPES,
    TENSOR_DTYPES,
    bfloat16,
    bool_,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    is_float_dtype,
    is_low_precision,
    resolve_dtype,
    resolve_tensor_dtype,
    set_default_dtype,
    uint8,
)
from minitorch_accum.backend.numerics import NumericsFingerprint, numerics_fingerprint
from minitorch_accum.backend.numpy_backend import NumpyBackend
from minitorch_accum.backend.random import (
    default_generator,
    get_rng_state,
    manual_seed,
    set_rng_state,
)
from minitorch_accum.backend.threads import (
    THREADS_ENV,
    ThreadSettings,
    available_cpus,
    default_threads,
    set_threads,
    thread_settings,
    thread_summary,
)

__all__ = [
    "FLOAT_DTYPES",
    "MALLOC_ENV",
    "TENSOR_DTYPES",
    "THREADS_ENV",
    "Backend",
    "Device",
    "DeviceLike",
    "NumericsFingerprint",
    "NumpyBackend",
    "ThreadSettings",
    "available_cpus",
    "backend_for",
    "backend_of_array",
    "bfloat16",
    "bool_",
    "cuda_available",
    "default_generator",
    "default_threads",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "get_rng_state",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_float_dtype",
    "is_low_precision",
    "manual_seed",
    "numerics_fingerprint",
    "parse_device",
    "resolve_dtype",
    "resolve_tensor_dtype",
    "retain_freed_memory",
    "retained_memory",
    "set_default_dtype",
    "set_rng_state",
    "set_threads",
    "thread_settings",
    "thread_summary",
    "uint8",
]


@cache
def _backend(device: Device) -> Backend:
    if device.kind == "cpu":
        return NumpyBackend()
    from minitorch_accum.backend.cupy_backend import CupyBackend

    return CupyBackend(device.index)


def backend_for(device: DeviceLike | None) -> Backend:
    """The (shared) backend object for a device name or Device."""
    return _backend(parse_device(device))


def backend_of_array(array: object) -> Backend:
    """The backend an array belongs to: NumPy arrays are CPU, CuPy arrays their device."""
    if hasattr(array, "__cuda_array_interface__"):
        return backend_for(Device("cuda", int(array.device.id)))  # type: ignore[attr-defined]
    return backend_for("cpu")

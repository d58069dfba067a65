"""Which implementation runs a kernel call, and on which device.

CuPy arrays always go to the CUDA kernels (``cupy.RawModule``). NumPy arrays go
to the path chosen by ``MTA_KERNELS`` (or ``use_path``): ``native`` (the
default: the pybind11 module, SIMD on a thread pool), ``reference`` (pure NumPy, the
oracle) or ``emulated`` (the CUDA kernels themselves, run on the CPU by the
launch emulator).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "PATHS",
    "NativeExtensionMissingWarning",
    "cpu_path",
    "device_of",
    "is_cupy_array",
    "kernel_path",
    "native",
    "native_available",
    "one_device",
    "use_path",
]

PATHS: tuple[str, ...] = ("reference", "native", "emulated")
ENV_VAR = "MTA_KERNELS"

_native_module: ModuleType | None
_native_import_error: ImportError | None
try:
    from minitorch_accum import _native as _loaded
except ImportError as error:  # no compiler at install time: the NumPy reference still works
    _native_module, _native_import_error = None, error
else:
    _native_module, _native_import_error = _loaded, None


class NativeExtensionMissingWarning(RuntimeWarning):
    """The native CPU module is not built; kernels run on the slower NumPy reference."""


_override: str | None = None
_warned_missing = False


def native_available() -> bool:
    """Whether the native CPU module ``minitorch_accum._native`` was built and imports."""
    return _native_module is not None


# os.environ.get costs more than a small native kernel call (it encodes the key
# and decodes the value each time), yet MTA_KERNELS must be honoured when it
# changes at run time. CPython's os.environ keeps the encoded mapping in _data,
# so the raw value is looked up there directly; any other environ falls back.
_environ_data: dict | None = getattr(os.environ, "_data", None)
try:
    _environ_key: object = os.environ.encodekey(ENV_VAR)  # type: ignore[attr-defined]
except AttributeError:
    _environ_data = None
    _environ_key = ENV_VAR
_parsed: dict[object, str] = {}


def _environment_path() -> str:
    raw = _environ_data.get(_environ_key) if _environ_data is not None else os.environ.get(ENV_VAR)
    path = _parsed.get(raw)
    if path is None:
        value = os.environ.get(ENV_VAR) or "native"
        if value not in PATHS:
            raise ValueError(f"{ENV_VAR}={value!r} is not a kernel path; choose one of {', '.join(PATHS)}")
        path = _parsed[raw] = value
    return path


def _requested_path() -> str:
    return _override if _override is not None else _environment_path()


def kernel_path() -> str:
    """The CPU path kernels take now: "reference", "native" or "emulated".

    From ``use_path`` if active, else ``MTA_KERNELS`` (default "native"); "native"
    becomes "reference" when the extension is missing.
    """
    path = _requested_path()
    if path == "native" and _native_module is None:
        return "reference"
    return path


def cpu_path() -> str:
    """kernel_path() for a kernel about to run: warns once when falling back."""
    global _warned_missing
    path = _requested_path()
    if path == "reference" or _native_module is not None:
        return path
    if path == "emulated":
        raise RuntimeError(
            f"{ENV_VAR}=emulated needs the native extension minitorch_accum._native, which failed "
            f"to import ({_native_import_error}); rebuild with `pip install -e .`"
        )
    if not _warned_missing:
        _warned_missing = True
        warnings.warn(
            f"minitorch_accum._native is not available ({_native_import_error}); kernels run on "
            "the NumPy reference. Rebuild with `pip install -e .` for the native CPU path.",
            NativeExtensionMissingWarning,
            stacklevel=3,
        )
    return "reference"


@contextmanager
def use_path(path: str) -> Iterator[None]:
    """Run the CPU kernels inside the block on ``path``, whatever MTA_KERNELS says."""
    global _override
    if path not in PATHS:
        raise ValueError(f"{path!r} is not a kernel path; choose one of {', '.join(PATHS)}")
    previous = _override
    _override = path
    try:
        yield
    finally:
        _override = previous


def native() -> ModuleType:
    """The native module; RuntimeError naming the import failure when it is missing."""
    if _native_module is None:
        raise RuntimeError(f"minitorch_accum._native is not available: {_native_import_error}")
    return _native_module


def is_cupy_array(x: object) -> bool:
    """True for a CuPy ndarray, recognized without importing CuPy."""
    return type(x).__module__.startswith("cupy") and hasattr(x, "__cuda_array_interface__")


def device_of(x: object) -> str:
    """ "host" for a NumPy array, "cuda:N" for a CuPy array on device N."""
    if isinstance(x, np.ndarray):
        return "host"
    if is_cupy_array(x):
        return f"cuda:{x.device.id}"  # type: ignore[attr-defined]
    raise TypeError(type(x).__qualname__)


def _spoken(device: str) -> str:
    return "the host (NumPy)" if device == "host" else f"{device} (CuPy)"


def one_device(kernel: str, named: Iterable[tuple[str, Any]]) -> str:
    """The one device all named arrays live on; None entries are skipped.

    TypeError for a non-array, or for arrays on different devices (naming both).
    """
    first_role = ""
    first = ""
    for role, x in named:
        if x is None:
            continue
        try:
            device = device_of(x)
        except TypeError:
            raise TypeError(f"{kernel}: {role} must be a NumPy or CuPy array, got {type(x).__qualname__}") from None
        if not first:
            first_role, first = role, device
        elif device != first:
            raise TypeError(
                f"{kernel}: {role} is on {_spoken(device)} but {first_role} is on {_spoken(first)}; "
                "all arrays of one call must be on one device"
            )
    return first or "host"

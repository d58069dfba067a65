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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType

import numpy as np

from minitorch_accum.kernels import reference
from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.validation import check_lengths

__all__ = [
    "PATHS",
    "NativeExtensionMissingWarning",
    "call_device",
    "cpu_path",
    "device_of",
    "host_module",
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
    import minitorch_accum._native as _loaded
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


# MTA_KERNELS is read at every call, so a change at run time is honoured; only
# the check of a value already seen is cached. os.environ.get of an unset name
# costs ~0.8 us (Mapping.get goes through a KeyError), most of a small kernel
# call; os.environ writes every change through putenv (as documented), so the C
# getenv of the native module sees the same value for ~0.05 us.
_checked: dict[str | None, str] = {}
_getenv = _native_module.getenv if _native_module is not None else os.environ.get


def _environment_path() -> str:
    raw = _getenv(ENV_VAR)
    path = _checked.get(raw)
    if path is None:
        value = raw or "native"
        if value not in PATHS:
            raise ValueError(f"{ENV_VAR}={value!r} is not a kernel path; choose one of {', '.join(PATHS)}")
        path = _checked[raw] = value
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


def host_module() -> ModuleType | None:
    """The module a call on NumPy arrays runs on now: the native module or the NumPy reference
    (both have the same signatures); None on the emulated path, which plans launches as CuPy does."""
    path = cpu_path()
    if path == "native":
        return _native_module
    return reference if path == "reference" else None


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


def one_device(kernel: str, named: Iterable[tuple[str, object]]) -> str:
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


def _numpy_or_none(values: Iterable[object]) -> bool:
    # a plain loop: all() over a generator costs more than the rest of the check
    for x in values:  # noqa: SIM110
        if x is not None and type(x) is not np.ndarray:
            return False
    return True


def call_device(
    kernel: str,
    names: Sequence[str],
    values: Sequence[Array | Sequence[Array] | None],
    *,
    listed: bool,
    flag: Array | None = None,
    optional: Sequence[str] = (),
) -> str:
    """The one device of a call's arrays: one value per name, or (listed) one list per name
    ("accs", "gs": the names take an "s"); a list named in ``optional`` may be None.

    NumPy arrays and None (the host) are recognized first and cheaply: the host module then
    makes every check itself. Anything else is checked here for list type and length, and
    for one device (TypeError naming both devices otherwise).
    """
    if flag is None or type(flag) is np.ndarray:
        if not listed:
            if _numpy_or_none(values):
                return "host"
        elif all(v is None or (type(v) in (list, tuple) and _numpy_or_none(v)) for v in values):
            return "host"
    if not listed:
        return one_device(kernel, [*zip(names, values, strict=True), ("flag", flag)])
    lists = [(f"{name}s", v) for name, v in zip(names, values, strict=True) if not (v is None and name in optional)]
    checked = check_lengths(kernel, lists)
    named = [(f"{role}[{i}]", x) for (role, _), xs in zip(lists, checked, strict=True) for i, x in enumerate(xs)]
    return one_device(kernel, [*named, ("flag", flag)])

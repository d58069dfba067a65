"""The Backend interface: what the ops and the accumulation layer may ask of a device.

Ops are written once against ``backend.xp`` (NumPy's array API, which CuPy mirrors)
plus the few operations below whose spelling differs between the two libraries.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from minitorch_accum.backend.device import Device

__all__ = ["Backend"]


class Backend(ABC):
    """A device and the array library that computes on it."""

    device: Device
    xp: Any  # numpy or cupy
    #: whether ``device_scope()`` does anything (CuPy: make the device current); when it does
    #: not, an op inside a forward whose errstate is already entered calls no context at all.
    #: A subclass that overrides ``device_scope`` has one unless it says otherwise.
    has_device_scope: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "has_device_scope" not in cls.__dict__ and "device_scope" in cls.__dict__:
            cls.has_device_scope = True

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def asarray(self, data: Any, dtype: np.dtype | None = None, copy: bool = False) -> Any:
        """Data (nested lists, NumPy or device arrays) as an array on this device.

        With ``copy=False`` an array already on this device with this dtype is returned
        as it is (shared); ``copy=True`` always gives a fresh array."""

    @abstractmethod
    def to_host(self, array: Any) -> np.ndarray:
        """A NumPy copy (or view, on the CPU) of an array of this device."""

    @abstractmethod
    def is_array(self, value: Any) -> bool:
        """True when ``value`` is an array of this backend's array type."""

    @abstractmethod
    def erf(self, x: Any) -> Any:
        """The error function elementwise (NumPy has none; SciPy and CuPy do)."""

    @abstractmethod
    def scatter_add(self, target: Any, indices: Any, values: Any) -> None:
        """``target[indices] += values`` where repeated indices add up (unbuffered)."""

    @abstractmethod
    def gemm_into(self, a: Any, b: Any, out: Any, alpha: float, beta: float) -> bool:
        """``out = alpha * a @ b + beta * out`` for 2-D arrays, written into ``out`` in place.

        Returns True when a BLAS GEMM wrote into ``out`` directly (no temporary the
        size of ``out``), False when it had to fall back to a product and an update.
        """

    def synchronize(self) -> None:  # noqa: B027 - a no-op is the right default for the CPU
        """Wait for queued device work (a no-op on the CPU)."""

    def device_scope(self) -> contextlib.AbstractContextManager:
        """Make this backend's device current while an op runs (a no-op on the CPU)."""
        return contextlib.nullcontext()

    def __repr__(self) -> str:
        return f"{self.name}({self.device})"

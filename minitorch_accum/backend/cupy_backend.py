"""The GPU backend: CuPy arrays, cuBLAS for GEMMs that accumulate into a buffer.

CuPy is imported only when a CUDA device is first asked for, so the package works
without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.backend.base import Backend
from minitorch_accum.backend.device import Device

__all__ = ["CupyBackend", "cuda_available", "import_cupy"]


def import_cupy() -> Any:
    """Import CuPy or raise an error that says how to install it."""
    try:
        import cupy
    except ImportError as exc:
        raise RuntimeError(
            "CUDA tensors need CuPy: install the 'cuda' extra "
            "(pip install 'minitorch_accum[cuda]' for CUDA 12, '[cuda13]' for CUDA 13)"
        ) from exc
    return cupy


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        cupy = import_cupy()
        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:
        return False


class CupyBackend(Backend):
    """Arrays are ``cupy.ndarray`` on one CUDA device."""

    def __init__(self, index: int = 0) -> None:
        cupy = import_cupy()
        count = int(cupy.cuda.runtime.getDeviceCount())
        if index >= count:
            raise ValueError(f"device cuda:{index} does not exist: this machine has {count} CUDA device(s)")
        self.device = Device("cuda", index)
        self.xp = cupy
        self._cupy = cupy

    def device_scope(self) -> Any:
        return self._cupy.cuda.Device(self.device.index)

    def asarray(self, data: Any, dtype: np.dtype | None = None, copy: bool = False) -> Any:
        with self.device_scope():
            if copy:
                return self._cupy.array(data, dtype=dtype, copy=True)
            return self._cupy.asarray(data, dtype=dtype)

    def to_host(self, array: Any) -> np.ndarray:
        return self._cupy.asnumpy(array)

    def is_array(self, value: Any) -> bool:
        return isinstance(value, self._cupy.ndarray)

    def erf(self, x: Any) -> Any:
        from cupyx.scipy import special

        with self.device_scope():
            if x.dtype in (np.float32, np.float64):
                return special.erf(x)
            return special.erf(x.astype(np.float32)).astype(x.dtype)

    def scatter_add(self, target: Any, indices: Any, values: Any) -> None:
        with self.device_scope():
            # cupy.add.at is the ufunc form (CuPy 13+); cupyx.scatter_add warns from CuPy 14 on.
            add_at = getattr(self._cupy.add, "at", None)
            if add_at is not None:
                add_at(target, indices, values)
            else:
                import cupyx

                cupyx.scatter_add(target, indices, values)

    def gemm_into(self, a: Any, b: Any, out: Any, alpha: float, beta: float, background: bool = False) -> bool:
        # CuPy's GEMM is asynchronous on the device already: ``background`` changes nothing
        cupy = self._cupy
        with self.device_scope():
            if out.dtype in (np.float32, np.float64) and out.flags.c_contiguous and out.size:
                from cupy import cublas

                # 16-bit factors are widened (the factors are copied, never the product);
                # cuBLAS then writes out = alpha a @ b + beta out in place
                a = a if a.dtype == out.dtype else a.astype(out.dtype)
                b = b if b.dtype == out.dtype else b.astype(out.dtype)
                cublas.gemm("N", "N", a, b, out=out, alpha=alpha, beta=beta)
                return True
            product = cupy.matmul(a, b).astype(out.dtype, copy=False)
            if beta == 0.0:
                cupy.multiply(product, out.dtype.type(alpha), out=out)
            else:
                out *= out.dtype.type(beta)
                out += out.dtype.type(alpha) * product
            return False

    def synchronize(self) -> None:
        with self.device_scope():
            self._cupy.cuda.get_current_stream().synchronize()

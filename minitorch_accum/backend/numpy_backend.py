"""The CPU backend: NumPy arrays, SciPy BLAS for GEMMs that accumulate into a buffer."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special
from scipy.linalg import blas

from minitorch_accum import kernels
from minitorch_accum.backend.base import Backend
from minitorch_accum.backend.blas import find_gemm, native_gemm_for, weight_gradient_blocks
from minitorch_accum.backend.device import Device

__all__ = ["NumpyBackend"]

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}


def _row_major_operand(m: np.ndarray) -> tuple[np.ndarray, bool]:
    """``m`` as a row-major operand and its trans flag (a copy only if neither order fits)."""
    if m.flags.c_contiguous:
        return m, False
    if m.flags.f_contiguous:
        return m.T, True
    return np.ascontiguousarray(m), False


def _row_major_product(gemm: Callable[..., None], a: np.ndarray, b: np.ndarray, **extra: Any) -> np.ndarray:
    """``a @ b`` of 2-D arrays by a row-major GEMM into a new array (``extra``: the native GEMM's
    ``bias=``, a row added to every row of the product)."""
    out = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    left, right = _row_major_operand(a), _row_major_operand(b)
    gemm(out, left[0], left[1], right[0], right[1], 1.0, 0.0, **extra)
    return out


def _fortran_operand(m: np.ndarray) -> tuple[np.ndarray, int] | None:
    """``m`` as a Fortran-ordered operand and its BLAS trans flag, or None if it needs a copy."""
    if m.flags.f_contiguous:
        return m, 0
    if m.flags.c_contiguous:
        return m.T, 1
    return None


def _row_vector_fits(matrix: np.ndarray, vector: np.ndarray) -> bool:
    """Whether ``matrix + vector`` is the native row-vector add: the same float dtype, ``vector``
    as long as ``matrix``'s contiguous last axis, at least two rows of it."""
    return (matrix.ndim >= 2 and matrix.dtype == vector.dtype and matrix.dtype in _GEMM
            and matrix.shape[-1] == vector.shape[0] and matrix.size > vector.shape[0]
            and matrix.flags.c_contiguous and vector.flags.c_contiguous and kernels.row_vector_available())


class NumpyBackend(Backend):
    """Arrays are ``numpy.ndarray``; bfloat16 comes from ml_dtypes."""

    def __init__(self) -> None:
        self.device = Device("cpu")
        self.xp = np

    def asarray(self, data: Any, dtype: np.dtype | None = None, copy: bool = False) -> np.ndarray:
        if hasattr(data, "__cuda_array_interface__"):
            data = data.get()
        return np.array(data, dtype=dtype, copy=True) if copy else np.asarray(data, dtype=dtype)

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def is_array(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def erf(self, x: np.ndarray) -> np.ndarray:
        # SciPy has loops for float32 and float64 only: 16-bit inputs go through float32
        if x.dtype in (np.float32, np.float64):
            return special.erf(x)
        return special.erf(x.astype(np.float32)).astype(x.dtype)

    def scatter_add(self, target: np.ndarray, indices: Any, values: np.ndarray) -> None:
        np.add.at(target, indices, values)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        gemm = native_gemm_for(a.dtype)
        if gemm is None or a.dtype != b.dtype or a.ndim != 2 or b.ndim != 2 or not a.size:
            return np.matmul(a, b)
        return _row_major_product(gemm, a, b)

    def batched_matmul(self, a: Any, b: Any) -> Any:
        # every stack the native GEMM can take, so that a float32 product is its bits wherever it is:
        # batch axes that broadcast are broadcast views (stride 0), matrices of other strides copied
        if (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and native_gemm_for(a.dtype) is not None and min(a.ndim, b.ndim) >= 2
                and max(a.ndim, b.ndim) >= 3 and a.shape[-1] == b.shape[-2]):
            batch = a.shape[:-2]
            if b.shape[:-2] != batch:
                batch = np.broadcast_shapes(batch, b.shape[:-2])
                a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
                b = np.broadcast_to(b, (*batch, *b.shape[-2:]))
            out = np.empty((*batch, a.shape[-2], b.shape[-1]), dtype=a.dtype)
            if kernels.stacked_gemm(a, b, out) or (a.shape[-1] and kernels.stacked_gemm(
                    np.ascontiguousarray(a), np.ascontiguousarray(b), out)):
                return out
        return np.matmul(a, b)

    def linear(self, x: Any, w: Any, bias: Any) -> Any:
        # float32 on the native GEMM (native_gemm_for's float32 answer is it or None): the bias added
        # in its epilogue, the bits of matmul then add
        if (x.dtype == np.float32 and w.dtype == bias.dtype == x.dtype and x.size and w.shape[1]
                and isinstance(bias, np.ndarray) and native_gemm_for(x.dtype) is not None):
            rows = math.prod(x.shape[:-1])
            out = _row_major_product(kernels.gemm, x.reshape(rows, x.shape[-1]), w,
                                     bias=np.ascontiguousarray(bias))
            return out.reshape(*x.shape[:-1], w.shape[1])
        return super().linear(x, w, bias)

    def add(self, a: Any, b: Any) -> Any:
        # a row vector over the rows of a contiguous matrix (either order: IEEE addition commutes)
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            if b.ndim == 1 and _row_vector_fits(a, b):
                return kernels.add_row_vector(a.reshape(-1, b.shape[0]), b).reshape(a.shape)
            if a.ndim == 1 and _row_vector_fits(b, a):
                return kernels.add_row_vector(b.reshape(-1, a.shape[0]), a).reshape(b.shape)
        return a + b

    def sum_rows(self, grad: Any) -> Any:
        # one column NumPy sums pairwise, not row by row: it stays NumPy's
        if (grad.dtype in _GEMM and grad.ndim == 2 and grad.shape[0] > 0 and grad.shape[1] > 1
                and grad.flags.c_contiguous and kernels.row_vector_available()):
            return kernels.sum_rows(grad)
        return np.sum(grad, axis=0)

    def settle(self) -> None:
        # the native module keeps the one GEMM in flight, whichever backend object started it
        if kernels.float32_gemm_available():
            kernels.gemm_finish()

    def gemm_into(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float, beta: float,
                  background: bool = False) -> bool:
        gemm = _GEMM.get(out.dtype)
        if gemm is None or not out.flags.c_contiguous or out.size == 0:
            return self._gemm_fallback(a, b, out, alpha, beta)
        # 16-bit factors (mixed precision) are widened to the buffer's dtype: the
        # factors are copied, never the product, so the GEMM still writes in place
        a = a if a.dtype == out.dtype else a.astype(out.dtype)
        b = b if b.dtype == out.dtype else b.astype(out.dtype)
        row_major = find_gemm(out.dtype)
        if row_major is not None:
            left, right = _row_major_operand(a), _row_major_operand(b)
            # the weight gradient a^T g: K-blocks of rows of both factors, beta = 1 after the first
            blocks = weight_gradient_blocks(left[0].shape[0], *out.shape) if left[1] and not right[1] else None
            if blocks is None:
                if background and row_major is kernels.gemm:  # the native pool's: it can hand it over
                    kernels.gemm_start(out, left[0], left[1], right[0], right[1], alpha, beta)
                else:
                    row_major(out, left[0], left[1], right[0], right[1], alpha, beta)
                return True
            for start, end in blocks:
                row_major(out, left[0][start:end], True, right[0][start:end], False, alpha, beta if start == 0 else 1.0)
            return True
        return self._scipy_gemm(gemm, a, b, out, alpha, beta)

    @staticmethod
    def _scipy_gemm(gemm: Any, a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float, beta: float) -> bool:
        # A C-ordered `out` is the Fortran-ordered out.T, which BLAS can overwrite in
        # place: out.T = alpha * b.T @ a.T + beta * out.T.
        left = _fortran_operand(b.T)
        right = _fortran_operand(a.T)
        if left is None:
            left = (np.asfortranarray(b.T), 0)
        if right is None:
            right = (np.asfortranarray(a.T), 0)
        target = out.T
        result = gemm(alpha, left[0], right[0], beta=beta, c=target,
                      trans_a=left[1], trans_b=right[1], overwrite_c=True)
        if result.ctypes.data != target.ctypes.data:  # BLAS made a copy: keep the answer anyway
            out[...] = result.T
            return False
        return True

    def _gemm_fallback(self, a: np.ndarray, b: np.ndarray, out: np.ndarray, alpha: float, beta: float) -> bool:
        # an out no GEMM can write in place: the product apart (the native GEMM's bits where it can)
        product = self.matmul(a, b).astype(out.dtype, copy=False)
        if alpha != 1.0:
            product *= out.dtype.type(alpha)
        if beta == 0.0:
            out[...] = product
        else:
            if beta != 1.0:
                out *= out.dtype.type(beta)
            out += product
        return False

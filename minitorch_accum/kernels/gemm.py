"""GEMM for the native pool. float32: the GEMM of our own (csrc/native/sgemm_cpu.cpp), every
element of out summed in one fixed order, its work cut over the pool, so its bits depend on
neither the thread count, the vector instruction set nor the OpenBLAS kernel. float64: one
single-threaded call of the BLAS NumPy loaded, never cut. Two threads also work on two products at
once (a weight gradient's in the background, ``gemm_start``) and on stacks of them
(``stacked_gemm``). csrc/native/gemm_cpu.cpp says why one pool and not OpenBLAS's own.

The kernels floor does not look for a BLAS itself: ``backend/blas.py`` finds NumPy's bundled
OpenBLAS and registers its ``cblas_?gemm`` here (``register_blas_gemm``); until then, or without
the native module, ``gemm_available()`` is False and float64 products go to the BLAS as before.
float32 needs no BLAS (``float32_gemm_available()``: the native module alone), so a NumPy built
without a bundled OpenBLAS (MKL, Accelerate) still gets the same float32 bits.
"""

from __future__ import annotations

from minitorch_accum.kernels.arrays import HostArray
from minitorch_accum.kernels.dispatch import native, native_available

__all__ = ["float32_gemm_available", "gemm", "gemm_available", "gemm_finish", "gemm_start", "register_blas_gemm",
           "stacked_gemm"]


def register_blas_gemm(sgemm_address: int, dgemm_address: int) -> bool:
    """Give the native GEMM the addresses of a row-major ``cblas_sgemm`` and ``cblas_dgemm`` with
    64-bit integers; False (nothing registered) without the native module."""
    if not native_available() or not hasattr(native(), "register_blas_gemm"):
        return False
    native().register_blas_gemm(int(sgemm_address), int(dgemm_address))
    return True


def gemm_available() -> bool:
    """Whether ``gemm`` can run: the native module is here and a BLAS is registered."""
    return native_available() and hasattr(native(), "gemm") and bool(native().blas_gemm_registered())


def float32_gemm_available() -> bool:
    """Whether ``gemm``, ``gemm_start`` and ``stacked_gemm`` can run float32 products: the native
    module is here (its float32 GEMM is its own, no BLAS registered)."""
    return native_available() and hasattr(native(), "gemm")


def gemm(out: HostArray, a: HostArray, trans_a: bool, b: HostArray, trans_b: bool, alpha: float, beta: float,
         bias: HostArray | None = None) -> None:
    """out = alpha op(a) op(b) + beta out in place, op transposing where asked; float32 or float64,
    every array 2-D and C-contiguous. float32 sums each element in blocks of 256 k (each an FMA
    chain from +0, the blocks' sums added in order), then alpha * sum, then + beta * out (out is
    not read when beta is 0), then + bias[j] when a bias row is given (float32 only: a Linear's
    forward, rounded as the separate addition rounds it, without its pass over out); float64 is
    one single-threaded BLAS call."""
    native().gemm(a, bool(trans_a), b, bool(trans_b), out, float(alpha), float(beta), bias)


def gemm_start(out: HostArray, a: HostArray, trans_a: bool, b: HostArray, trans_b: bool, alpha: float,
               beta: float) -> bool:
    """``gemm``, handed to a pool helper while the caller goes on (the same bits): True when it
    was, and then ``gemm_finish`` must come before anything reads ``out`` or writes ``a``, ``b`` or
    ``out`` (the arrays are held until then); False when it ran on the calling thread already (one
    thread, the pool busy, a product of under 2^18 multiply-adds). One at a time: a second start
    finishes the first."""
    return bool(native().gemm_start(a, bool(trans_a), b, bool(trans_b), out, float(alpha), float(beta)))


def gemm_finish() -> None:
    """Wait for the GEMM ``gemm_start`` handed to a helper (nothing when none runs)."""
    native().gemm_finish()


def stacked_gemm(a: HostArray, b: HostArray, out: HostArray) -> bool:
    """out[i] = a[i] @ b[i] over the leading axes a, b and out share (out C-contiguous, float32 or
    float64; a and b any strides whose matrices are row- or column-major), each product one
    single-threaded BLAS call, whole products cut over the native pool. False, with nothing
    written, when an operand's matrices are neither (the caller uses NumPy)."""
    return bool(native().stacked_gemm(a, b, out))

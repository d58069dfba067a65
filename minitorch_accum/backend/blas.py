"""GEMM with beta, on the same BLAS that NumPy's matmul uses.

NumPy wheels bundle their own OpenBLAS, and SciPy wheels bundle another. Calling
both in turn (NumPy's matmul for the forward, SciPy's sgemm for the beta = 1 weight
gradient) is 2-3x slower on a few cores: each library keeps its worker threads
spinning after a call, and they steal the cores the other one needs. So the fused
GEMM calls ``cblas_?gemm`` from NumPy's bundled OpenBLAS, and SciPy's
``sgemm``/``dgemm`` (overwrite_c, beta = 1) only when that cannot be found.

With the native module, the same ``cblas_?gemm`` is registered with it and every GEMM is one
single-threaded BLAS call made by the native module (``kernels.gemm``; a weight gradient's on a
pool helper while the caller goes on), so that one pool, not two taking turns on the same cores,
runs both the GEMMs and the fused kernels (issue 27; OpenBLAS is then kept at one thread, see
``threads.py``). Without it, ctypes calls the BLAS, which threads itself.

float32 products need no BLAS at all: the native module's float32 GEMM is its own, one summation
order on every machine (``native_gemm_for``). So a NumPy without a bundled OpenBLAS (conda's MKL
build) gets the same float32 bits as a wheel, and only float64 products there go to its BLAS.
``MTA_GEMM=scipy`` or ``ctypes`` asks for the BLAS for both dtypes (to compare the routes).
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from minitorch_accum import kernels

__all__ = ["FIXED_ORDER", "K_BLOCK", "MIN_BLOCKED_OUTPUT", "GemmFunction", "find_gemm", "float32_gemm_route",
           "native_gemm", "native_gemm_for", "weight_gradient_blocks"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112

# gemm(out, a, trans_a, b, trans_b, alpha, beta): out = alpha op(a) op(b) + beta out, in place
GemmFunction = Callable[[np.ndarray, np.ndarray, bool, np.ndarray, bool, float, float], None]

# The weight-gradient GEMM out(M, N) (+)= a(K, M)^T g(K, N) sums over K, the items of a
# micro-batch. Issue 19 measured OpenBLAS 2-2.5x slower than MKL on it at K = 1024 and parity
# when it is cut into K-blocks of 128-512, each a GEMM with beta = 1 after the first (the
# arena write already takes beta). Measured here (benchmarks/layer_ops.py, docs/kernels.md)
# one call was within 1.07-1.4x of MKL and blocks gained nothing: at GPT-2-small's shapes
# blocks of 256 ran at 0.99-1.04x the one call with 1 thread and 1.3-1.45x slower with 2
# threads on a busy machine; at the char transformer's (outputs up to 256 x 64) blocks of
# 128-256 were 10-50% slower. So blocking is off unless MTA_GEMM_K_BLOCK=N asks for blocks
# of N (where OpenBLAS is slow, as in the measurement), and even then only for
# outputs of MIN_BLOCKED_OUTPUT elements or more.
K_BLOCK = 0  # the default block size: 0, one call
MIN_BLOCKED_OUTPUT = 256 * 256  # M * N from which K-blocks may pay


def weight_gradient_blocks(k: int, m: int, n: int) -> list[tuple[int, int]] | None:
    """The [start, end) K-blocks of an out(m, n) += a(k, m)^T g(k, n) GEMM, or None for one call."""
    setting = os.environ.get("MTA_GEMM_K_BLOCK")
    block = K_BLOCK if setting is None else int(setting)
    if block <= 0 or k < 2 * block or m * n < MIN_BLOCKED_OUTPUT:
        return None
    return [(start, min(k, start + block)) for start in range(0, k, block)]


@cache
def _numpy_openblas() -> Any:
    """NumPy's bundled OpenBLAS (ILP64, ``scipy_`` prefix), or None."""
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so*"))):
        try:
            lib = ctypes.CDLL(path)
            lib.scipy_cblas_sgemm64_  # noqa: B018 - the symbol must exist
            lib.scipy_cblas_dgemm64_  # noqa: B018
        except (OSError, AttributeError):
            continue
        return lib
    return None


def _cblas(function: Any, scalar: type) -> GemmFunction:
    i64 = ctypes.c_int64
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64, i64, i64, scalar, ctypes.c_void_p, i64,
                         ctypes.c_void_p, i64, scalar, ctypes.c_void_p, i64]
    function.restype = None

    def gemm(out: np.ndarray, a: np.ndarray, trans_a: bool, b: np.ndarray, trans_b: bool, alpha: float,
             beta: float) -> None:
        m, n = out.shape
        k = a.shape[0] if trans_a else a.shape[1]
        function(_ROW_MAJOR, _TRANS if trans_a else _NO_TRANS, _TRANS if trans_b else _NO_TRANS, m, n, k,
                 alpha, a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], beta, out.ctypes.data, n)

    return gemm


def _blas_asked() -> bool:
    return os.environ.get("MTA_GEMM") in ("scipy", "ctypes")


@cache
def native_gemm() -> GemmFunction | None:
    """The native pool's GEMM over NumPy's own BLAS (registered with it on the first call), or
    None without the native module, without a bundled OpenBLAS, or with ``MTA_GEMM=ctypes`` or
    ``scipy`` (then the BLAS threads itself)."""
    lib = _numpy_openblas()
    if lib is None or _blas_asked():
        return None
    address = ctypes.cast(lib.scipy_cblas_sgemm64_, ctypes.c_void_p).value
    double_address = ctypes.cast(lib.scipy_cblas_dgemm64_, ctypes.c_void_p).value
    if address is None or double_address is None or not kernels.register_blas_gemm(address, double_address):
        return None
    return kernels.gemm


#: what ``float32_gemm_route`` says when every float32 product is the native GEMM's
FIXED_ORDER = "native, one order"


@cache  # asked before every product (NumPy's dtypes are singletons, so the key is cheap)
def native_gemm_for(dtype: Any) -> GemmFunction | None:
    """``kernels.gemm`` when the native module runs products of ``dtype`` (its row-major GEMM, and
    with it ``stacked_gemm`` and ``gemm_start``), else None: float32 needs only the native module,
    float64 also NumPy's bundled OpenBLAS (``native_gemm``); ``MTA_GEMM=scipy|ctypes`` turns both off."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return kernels.gemm if not _blas_asked() and kernels.float32_gemm_available() else None
    return native_gemm() if dtype == np.float64 else None


def float32_gemm_route() -> str:
    """Who rounds this process's float32 products: ``FIXED_ORDER`` (the native GEMM, the same bits
    on every machine) or the BLAS, and why."""
    if native_gemm_for(np.dtype(np.float32)) is not None:
        return FIXED_ORDER
    if _blas_asked():
        return f"BLAS (MTA_GEMM={os.environ['MTA_GEMM']})"
    return "BLAS (no native module)"


@cache
def find_gemm(dtype: np.dtype) -> GemmFunction | None:
    """A row-major GEMM for float32/float64: the native module's (``native_gemm_for``), else one
    from NumPy's own BLAS through ctypes; None when neither is here (NumPy without a bundled
    OpenBLAS: the caller uses SciPy)."""
    if np.dtype(dtype) not in (np.float32, np.float64) or os.environ.get("MTA_GEMM") == "scipy":
        return None
    pooled = native_gemm_for(dtype)
    if pooled is not None:
        return pooled
    lib = _numpy_openblas()
    if lib is None:
        return None
    if dtype == np.float32:
        return _cblas(lib.scipy_cblas_sgemm64_, ctypes.c_float)
    return _cblas(lib.scipy_cblas_dgemm64_, ctypes.c_double)

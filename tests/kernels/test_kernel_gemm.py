"""The native pool's GEMM: out = alpha op(a) op(b) + beta out for every transpose, cut into one
block per thread (rows or columns of out), each block a single-threaded call of NumPy's BLAS;
the same products as NumPy's matmul, whatever the thread count."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.backend.blas import native_gemm

pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module and NumPy's OpenBLAS")


@pytest.fixture(params=[1, 2])
def threads(request):
    K.set_native_threads(request.param)
    yield request.param
    K.set_native_threads(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("shape", [(1024, 64, 192), (64, 1024, 256), (3, 5, 7), (300, 17, 1000)])
def test_gemm_equals_numpy_for_every_transpose_and_thread_count(threads, dtype, trans_a, trans_b, shape) -> None:
    m, k, n = shape
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    out = rng.standard_normal((m, n)).astype(dtype)
    before = out.copy()
    K.gemm(out, a, trans_a, b, trans_b, 0.5, 1.0)
    expected = 0.5 * ((a.T if trans_a else a) @ (b.T if trans_b else b)) + before
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance * np.sqrt(k))


def test_two_threads_write_every_block_of_a_large_product() -> None:
    # a product large enough to be cut: rows (m >= n), then columns (n > m)
    rng = np.random.default_rng(1)
    for m, k, n in ((2048, 64, 64), (64, 64, 2048)):
        a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
        out = np.full((m, n), np.nan, np.float32)
        K.set_native_threads(2)
        try:
            K.gemm(out, a, False, b, False, 1.0, 0.0)
        finally:
            K.set_native_threads(0)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: K.gemm(np.zeros((2, 3)), np.zeros((2, 4)), False, np.zeros((4, 3), np.float32), False, 1, 0), TypeError,
     "gemm: b (shape (4, 3), float32) must have the dtype of out (shape (2, 3), float64)"),
    (lambda: K.gemm(np.zeros((2, 3)), np.zeros((2, 4)), False, np.zeros((5, 3)), False, 1, 0), ValueError,
     "gemm: op(a) is 2 x 4, op(b) 5 x 3: they do not make out (shape (2, 3), float64)"),
    (lambda: K.gemm(np.zeros((2, 3), np.int64), np.zeros((2, 4)), False, np.zeros((4, 3)), False, 1, 0), TypeError,
     "gemm: unsupported dtype out (shape (2, 3), int64); supported: float32, float64"),
    (lambda: K.gemm(np.zeros((3, 2)).T, np.zeros((2, 4)), False, np.zeros((4, 3)), False, 1, 0), ValueError,
     "gemm: out (shape (2, 3), float64) must be C"),
])
def test_gemm_refuses_bad_arguments(call, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_the_backends_products_run_on_the_pool_and_the_blas_keeps_one_thread() -> None:
    from threadpoolctl import threadpool_info

    from minitorch_accum.backend import set_threads, thread_settings
    from minitorch_accum.backend.numpy_backend import NumpyBackend

    settings = set_threads(2)
    try:
        assert settings.gemm == "native pool" and "GEMMs on the native pool" in settings.summary()
        # the BLAS libraries keep one thread; an OpenMP pool (torch's, scikit-learn's) gets the count
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas and {pool["num_threads"] for pool in blas} == {1} and settings.native == 2
        assert min(thread_settings().blas.values()) == 1
        a = np.random.default_rng(2).standard_normal((64, 8)).astype(np.float32)
        np.testing.assert_allclose(NumpyBackend().matmul(a.T, a), a.T @ a, rtol=1e-5, atol=1e-5)
    finally:
        set_threads()

"""Who runs a float32 product: the native GEMM whenever the native module is here, whether or not
NumPy bundles an OpenBLAS (a conda NumPy links MKL: no ``libscipy_openblas64_`` to register), so
such a machine gets the same float32 bits; float64 still needs the registered BLAS, and
``MTA_GEMM=scipy|ctypes`` hands both dtypes to the BLAS."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.backend import blas
from minitorch_accum.backend.numpy_backend import NumpyBackend

pytestmark = pytest.mark.skipif(not K.float32_gemm_available(), reason="needs the native module")


def _clear() -> None:
    for cached in (blas.native_gemm, blas.native_gemm_for, blas.find_gemm):
        cached.cache_clear()


@pytest.fixture
def fresh_routes(monkeypatch) -> Iterator[pytest.MonkeyPatch]:
    """The routes asked again under the test's patches, and again after them."""
    monkeypatch.delenv("MTA_GEMM", raising=False)
    _clear()
    yield monkeypatch
    monkeypatch.undo()
    _clear()


def _gemm_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    K.gemm(out, a, False, b, False, 1.0, 0.0)
    return out


def test_without_a_bundled_openblas_float32_still_runs_the_native_gemm_and_float64_goes_to_numpy(fresh_routes) -> None:
    fresh_routes.setattr(blas, "_numpy_openblas", lambda: None)
    assert blas.native_gemm() is None
    assert blas.native_gemm_for(np.float32) is K.gemm and blas.find_gemm(np.dtype(np.float32)) is K.gemm
    assert blas.native_gemm_for(np.float64) is None and blas.find_gemm(np.dtype(np.float64)) is None
    assert blas.float32_gemm_route() == blas.FIXED_ORDER
    backend = NumpyBackend()
    rng = np.random.default_rng(3)
    # 300 terms: more than one block of 256, where the native order and a BLAS's part ways
    a, b = rng.standard_normal((33, 300)).astype(np.float32), rng.standard_normal((300, 17)).astype(np.float32)
    np.testing.assert_array_equal(backend.matmul(a, b), _gemm_bits(a, b))
    np.testing.assert_array_equal(backend.batched_matmul(a[None], b[None])[0], _gemm_bits(a, b))
    out = np.ones((300, 17), np.float32)
    assert backend.gemm_into(a.T, a @ b, out, 0.5, 0.0)  # in place, by the native GEMM
    want = np.ones((300, 17), np.float32)
    K.gemm(want, a, True, np.ascontiguousarray(a @ b), False, 0.5, 0.0)
    np.testing.assert_array_equal(out, want)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_array_equal(backend.matmul(a64, b64), np.matmul(a64, b64))


@pytest.mark.parametrize("route", ["scipy", "ctypes"])
def test_mta_gemm_hands_float32_to_the_blas_and_the_route_says_so(fresh_routes, route: str) -> None:
    fresh_routes.setenv("MTA_GEMM", route)
    assert blas.native_gemm_for(np.float32) is None and blas.native_gemm_for(np.float64) is None
    assert blas.float32_gemm_route() == f"BLAS (MTA_GEMM={route})"
    a = np.random.default_rng(4).standard_normal((8, 300)).astype(np.float32)
    np.testing.assert_array_equal(NumpyBackend().matmul(a, a.T), np.matmul(a, a.T))


def test_without_the_native_module_the_route_is_the_blas(fresh_routes) -> None:
    fresh_routes.setattr(K, "float32_gemm_available", lambda: False)
    assert blas.native_gemm_for(np.float32) is None
    assert blas.float32_gemm_route() == "BLAS (no native module)"


def test_the_route_is_the_fixed_order_here() -> None:
    assert blas.float32_gemm_route() == blas.FIXED_ORDER
    assert blas.native_gemm_for(np.float16) is None and blas.native_gemm_for(np.float32) is K.gemm

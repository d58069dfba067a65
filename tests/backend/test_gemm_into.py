"""The GEMM that writes a weight gradient into its buffer: correct, in place, both BLAS routes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import blas

from minitorch_accum.backend import NumpyBackend, bfloat16
from minitorch_accum.backend.blas import find_gemm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("route", ["numpy-openblas", "scipy"])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_gemm_into_writes_in_place(dtype: type, route: str, beta: float) -> None:
    rng = np.random.default_rng(0)
    backend = NumpyBackend()
    x = rng.normal(size=(9, 5)).astype(dtype)
    g = rng.normal(size=(9, 4)).astype(dtype)
    arena = np.zeros(64, dtype=dtype)
    view = arena[16:36].reshape(5, 4)
    view[...] = rng.normal(size=(5, 4))
    expected = 0.25 * (x.T.astype(np.float64) @ g) + beta * view
    if route == "scipy":
        gemm = blas.sgemm if dtype == np.float32 else blas.dgemm
        fused = backend._scipy_gemm(gemm, x.T, g, view, 0.25, beta)
    else:
        if find_gemm(np.dtype(dtype)) is None:
            pytest.skip("NumPy was built without a bundled OpenBLAS")
        fused = backend.gemm_into(x.T, g, view, 0.25, beta)
    assert fused
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(arena[16:36].reshape(5, 4), expected, rtol=tolerance, atol=tolerance)
    assert not arena[:16].any() and not arena[36:].any()  # nothing outside the view was touched


def test_gemm_into_handles_every_operand_layout() -> None:
    rng = np.random.default_rng(1)
    backend = NumpyBackend()
    a = rng.normal(size=(6, 7))
    b = rng.normal(size=(7, 3))
    for left in (a, np.asfortranarray(a), a[:, ::-1][:, ::-1], np.repeat(a, 2, axis=1)[:, ::2]):
        out = np.zeros((6, 3))
        backend.gemm_into(left, b, out, 1.0, 0.0)
        np.testing.assert_allclose(out, a @ b, rtol=1e-12)


def test_sixteen_bit_factors_are_widened_not_the_product() -> None:
    rng = np.random.default_rng(2)
    backend = NumpyBackend()
    x = rng.normal(size=(4, 3)).astype(bfloat16)
    g = rng.normal(size=(4, 2)).astype(bfloat16)
    out = np.zeros((3, 2), dtype=np.float32)
    assert backend.gemm_into(x.T, g, out, 1.0, 1.0)
    np.testing.assert_allclose(out, x.T.astype(np.float32) @ g.astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_weight_gradient_gemm_in_k_blocks_equals_one_call(dtype: type, beta: float, monkeypatch) -> None:
    from minitorch_accum.backend import blas as blas_module

    if find_gemm(np.dtype(dtype)) is None:
        pytest.skip("NumPy was built without a bundled OpenBLAS")
    rng = np.random.default_rng(2)
    backend = NumpyBackend()
    x = rng.normal(size=(37, 6)).astype(dtype)
    g = rng.normal(size=(37, 5)).astype(dtype)
    start = rng.normal(size=(6, 5)).astype(dtype)
    expected = 0.5 * (x.T.astype(np.float64) @ g) + beta * start
    monkeypatch.setattr(blas_module, "MIN_BLOCKED_OUTPUT", 1)
    monkeypatch.setenv("MTA_GEMM_K_BLOCK", "8")
    assert blas_module.weight_gradient_blocks(37, 6, 5) == [(0, 8), (8, 16), (16, 24), (24, 32), (32, 37)]
    # beta 0: the first block must not read the buffer (a NaN there stays out of the sum)
    view = start.copy() if beta else np.full((6, 5), np.nan, dtype)
    assert backend.gemm_into(x.T, g, view, 0.5, beta)
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(view, expected, rtol=tolerance, atol=tolerance)
    monkeypatch.setenv("MTA_GEMM_K_BLOCK", "0")
    assert blas_module.weight_gradient_blocks(37, 6, 5) is None
    monkeypatch.undo()
    assert blas_module.weight_gradient_blocks(1024, 768, 3072) is None  # off by default: one call
    monkeypatch.setenv("MTA_GEMM_K_BLOCK", "256")
    assert len(blas_module.weight_gradient_blocks(1024, 768, 3072)) == 4
    assert blas_module.weight_gradient_blocks(1024, 64, 192) is None  # a small output: one call anyway


@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (0.5, 0.0), (-2.0, 1.0), (0.25, 3.0), (1.0, 1.0), (2.0, 2.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_out_no_gemm_can_write_takes_the_product_apart_scaled_and_added(alpha: float, beta: float,
                                                                          dtype: type) -> None:
    # a view with a column stride (no BLAS writes it in place): alpha a @ b + beta out, computed apart
    rng = np.random.default_rng(5)
    backend = NumpyBackend()
    a, b = rng.normal(size=(6, 300)).astype(dtype), rng.normal(size=(300, 4)).astype(dtype)
    store = rng.normal(size=(6, 8)).astype(dtype)
    between = store[:, 1::2].copy()
    out = store[:, ::2]
    before = out.copy()
    assert backend.gemm_into(a, b, out, alpha, beta) is False  # not fused: a product, then an update
    product = backend.matmul(a, b)  # the backend's own product, whose bits the fallback keeps
    if (alpha, beta) == (1.0, 0.0):
        np.testing.assert_array_equal(out, product)
    want = alpha * product.astype(np.float64) + beta * before.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-6 if dtype == np.float32 else 1e-13, atol=1e-5)
    assert out.dtype == dtype
    np.testing.assert_array_equal(store[:, 1::2], between)  # the columns between were not written

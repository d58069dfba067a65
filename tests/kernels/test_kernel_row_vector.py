"""The native row-vector kernels (a bias added to each row of a product, and its gradient summed
over the rows): NumPy's bits for every shape, dtype and thread count, and clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels.dispatch import native

pytestmark = pytest.mark.skipif(not K.row_vector_available(), reason="needs the native module")


@pytest.fixture(params=[1, 2])
def threads(request):
    K.set_native_threads(request.param)
    yield request.param
    K.set_native_threads(0)


def _spread(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Values over many binades, so that a sum in another order rounds to other bits."""
    return (rng.standard_normal(shape) * np.exp(4 * rng.standard_normal(shape))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1024, 256), (4097, 65), (3, 2), (1, 7), (2000, 64), (5, 200)])
def test_add_row_vector_is_numpys_sum_bit_for_bit(threads, dtype, shape) -> None:
    rng = np.random.default_rng(shape[0] * 31 + shape[1])
    x, v = _spread(rng, shape, dtype), _spread(rng, shape[1:], dtype)
    out = K.add_row_vector(x, v)
    assert out.dtype == x.dtype and out.shape == x.shape
    np.testing.assert_array_equal(out, x + v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1024, 256), (4097, 65), (3, 2), (1, 7), (2000, 64), (5000, 3), (70, 130)])
def test_sum_rows_adds_the_rows_in_numpys_order(threads, dtype, shape) -> None:
    rng = np.random.default_rng(shape[0] + 7 * shape[1])
    g = _spread(rng, shape, dtype)
    got = K.sum_rows(g)
    np.testing.assert_array_equal(got, g.sum(axis=0))
    # and not in some other order: pairwise sums of the same rows give other bits here
    if shape[0] >= 1024:
        pairwise = g.reshape(2, -1, shape[1]).sum(axis=1).sum(axis=0) if shape[0] % 2 == 0 else None
        if pairwise is not None:
            assert not np.array_equal(got, pairwise)


def test_sum_rows_of_negative_zeros_is_numpys_positive_zero() -> None:
    """NumPy's sum starts from +0, so rows of -0 sum to +0 (a start from the first row would keep -0)."""
    g = np.full((4, 3), -0.0, dtype=np.float32)
    got = K.sum_rows(g)
    assert not np.any(np.signbit(got)) and np.array_equal(np.signbit(got), np.signbit(g.sum(axis=0)))


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 300), columns=st.integers(2, 300), double=st.booleans(), seed=st.integers(0, 2**16))
def test_both_kernels_match_numpy_on_any_shape(rows: int, columns: int, double: bool, seed: int) -> None:
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(seed)
    x, v = _spread(rng, (rows, columns), dtype), _spread(rng, (columns,), dtype)
    np.testing.assert_array_equal(K.add_row_vector(x, v), x + v)
    np.testing.assert_array_equal(K.sum_rows(x), x.sum(axis=0))


def test_inf_and_nan_pass_through_as_in_numpy() -> None:
    x = np.array([[1.0, np.inf, np.nan], [2.0, -np.inf, 3.0]], dtype=np.float32)
    v = np.array([np.inf, np.inf, 1.0], dtype=np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(K.add_row_vector(x, v), x + v)
        np.testing.assert_array_equal(K.sum_rows(x), x.sum(axis=0))


def test_empty_columns_give_empty_results() -> None:
    assert K.add_row_vector(np.zeros((3, 0), np.float32), np.zeros(0, np.float32)).shape == (3, 0)
    assert K.add_row_vector(np.zeros((0, 4), np.float32), np.zeros(4, np.float32)).shape == (0, 4)
    assert K.sum_rows(np.zeros((3, 0), np.float32)).shape == (0,)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: K.add_row_vector(np.zeros((2, 3), np.float32), np.zeros(3, np.float64)),
         r"v \(shape \(3,\), float64\) must have the dtype of x \(shape \(2, 3\), float32\)"),
        (lambda: K.add_row_vector(np.zeros((2, 3), np.int64), np.zeros(3, np.int64)),
         r"unsupported dtype x \(shape \(2, 3\), int64\)"),
        (lambda: K.add_row_vector(np.zeros((2, 3), np.float32), np.zeros(4, np.float32)),
         r"v \(shape \(4,\), float32\) must have shape \(3,\), one entry per column of x"),
        (lambda: K.add_row_vector(np.zeros(3, np.float32), np.zeros(3, np.float32)),
         r"x \(shape \(3,\), float32\) must have 2 axes"),
        (lambda: K.add_row_vector(np.zeros((3, 2), np.float32).T, np.zeros(3, np.float32)),
         r"x .* C-contiguous"),
        (lambda: K.sum_rows(np.zeros((0, 3), np.float32)), r"g \(shape \(0, 3\), float32\) has no rows to sum"),
        (lambda: K.sum_rows(np.zeros((2, 3, 1), np.float32)), r"g \(shape \(2, 3, 1\), float32\) must have 2 axes"),
    ],
)
def test_bad_arguments_are_named(call, message) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        call()


def test_a_written_array_that_overlaps_an_input_is_refused() -> None:
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"overlap|share"):
        native().add_row_vector(x, np.zeros(3, np.float32), x)


@pytest.mark.parametrize("value", ["0", "5000", "junk", "-3", ""])
def test_any_pool_spin_setting_leaves_a_parallel_pass_working(value: str) -> None:
    """MTA_POOL_SPIN_US only sets how long an idle helper polls; a bad value falls back to the default."""
    code = textwrap.dedent("""
        import numpy as np
        import minitorch_accum.kernels as K
        K.set_native_threads(2)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((4096, 256)).astype(np.float32)
        for _ in range(3):
            assert np.array_equal(K.sum_rows(x), x.sum(axis=0))
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MTA_POOL_SPIN_US": value, "MTA_NUM_THREADS": "2"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr

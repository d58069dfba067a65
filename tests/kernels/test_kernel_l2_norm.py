"""The global L2 norm: every path sums squares in fp64 and agrees with the reference
up to fp64 summation rounding, across dtypes, mixed lists, several launches and
specials; the norm of any finite array is finite (no overflow of fp32 squares, fp64
squares scaled when they would overflow or underflow), unless the norm itself
exceeds the largest double."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dtypes import BFLOAT16, NORM_DTYPES
from minitorch_accum.kernels.launch import plan as launch_plan
from tests.kernels.kernel_cases import CPU_PATHS, array, offsets, on_path, seeds, sizes

DTYPES = sorted(NORM_DTYPES, key=str)


@pytest.mark.parametrize("path", CPU_PATHS)
@given(n=sizes, offset=offsets, seed=seeds, dtype=st.sampled_from(DTYPES))
def test_l2_norm_matches_reference(path, n, offset, seed, dtype):
    x = array(np.random.default_rng(seed), n, dtype, offset)
    with on_path(path):
        value = K.l2_norm(x)
    assert isinstance(value, float)
    # fp64 sums in another order: each of n terms rounds once, so |error| <= n * 2^-53 relative at
    # worst (1.5e-11 for 140,000 terms) and far less in practice; fp32 sums would miss by ~1e-7
    assert value == pytest.approx(reference.l2_norm(x), rel=1e-11, abs=1e-300)


@pytest.mark.parametrize("path", CPU_PATHS)
@given(
    shapes=st.lists(st.tuples(st.sampled_from([0, 1, 7, 65537, 140000]), st.sampled_from(DTYPES)), max_size=8),
    seed=seeds,
)
def test_multi_l2_norm_of_mixed_list_matches_reference(path, shapes, seed):
    rng = np.random.default_rng(seed)
    xs = [array(rng, n, dtype, int(rng.integers(0, 4))) for n, dtype in shapes]
    with on_path(path), launch_plan.table_limits(max_tensors=2, max_blocks=3):
        value = K.multi_l2_norm(xs)
    assert value == pytest.approx(reference.multi_l2_norm(xs), rel=1e-11, abs=1e-300)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_l2_norm_of_known_values(path):
    with on_path(path):
        assert K.l2_norm(np.full(100, 3.0, np.float32)) == 30.0
        assert K.multi_l2_norm([np.array([3.0]), np.array([4.0], np.float16)]) == 5.0
        assert K.l2_norm(np.zeros(0, np.float32)) == 0.0


@pytest.mark.parametrize("path", CPU_PATHS)
def test_l2_norm_propagates_inf_and_nan(path):
    x = np.ones(1000, np.float32)
    with on_path(path):
        x[17] = np.inf
        assert K.l2_norm(x) == math.inf
        x[18] = np.nan
        assert math.isnan(K.multi_l2_norm([np.ones(3), x]))


def _norm(values: list[float]) -> float:
    """The exact norm of a few values, to double rounding: math.hypot is correctly scaled."""
    return math.hypot(*values)


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("dtype", [np.float32, BFLOAT16])
def test_large_fp32_and_bf16_values_give_a_finite_norm(path, dtype):
    # 1e20 squared is 1e40, past fp32's 3.4e38: fp32 sums of squares said inf, and
    # clip_grad_norm then did not clip the exploding gradient
    x = np.full(1000, 1e20, dtype)
    big = np.full(3, 3e38, dtype)
    with on_path(path):
        assert K.l2_norm(x) == pytest.approx(float(x[0]) * math.sqrt(1000), rel=1e-12)
        assert K.multi_l2_norm([x, big]) == pytest.approx(_norm([float(x[0])] * 1000 + [float(big[0])] * 3), rel=1e-12)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_fp64_values_whose_squares_overflow_or_underflow_give_the_right_norm(path):
    cases = [
        [1e200] * 100,  # squares overflow
        [1e-200] * 100,  # squares underflow to 0
        [3e-320, 4e-320],  # subnormal values
        [1e300, 1e-300, -2e300],
        [1.2e308, 1e308],  # near the largest double: the norm still fits
        [2.5e-160] * 7 + [1e-170],  # squares subnormal: bits lost without scaling
    ]
    with on_path(path):
        for values in cases:
            x = np.array(values)
            assert K.l2_norm(x) == pytest.approx(_norm(values), rel=1e-14), values
        # a list mixing dtypes: one scale for all
        mixed = [np.full(5, 1e20, np.float32), np.array([1e250, -1e250]), np.full(4, 1e-30, np.float16)]
        expected = _norm([float(np.float32(1e20))] * 5 + [1e250, 1e250] + [float(np.float16(1e-30))] * 4)
        assert K.multi_l2_norm(mixed) == pytest.approx(expected, rel=1e-14)
        # the norm itself past the largest double: inf is the right answer
        assert K.l2_norm(np.array([1.7e308, 1.7e308])) == math.inf
        assert K.l2_norm(np.zeros(70_000)) == 0.0

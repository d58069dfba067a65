"""The global L2 norm: every path agrees with the float64 reference up to fp32
summation rounding, across dtypes, mixed lists, several launches and specials."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import launch_plan, reference
from minitorch_accum.kernels.dtypes import NORM_DTYPES
from tests.kernels.kernel_cases import CPU_PATHS, array, offsets, on_path, seeds, sizes

DTYPES = sorted(NORM_DTYPES, key=str)


@pytest.mark.parametrize("path", CPU_PATHS)
@given(n=sizes, offset=offsets, seed=seeds, dtype=st.sampled_from(DTYPES))
def test_l2_norm_matches_reference(path, n, offset, seed, dtype):
    x = array(np.random.default_rng(seed), n, dtype, offset)
    with on_path(path):
        value = K.l2_norm(x)
    assert isinstance(value, float)
    # fp32 partial sums of squares: a relative error of a few fp32 ulps per 1e3 terms
    assert value == pytest.approx(reference.l2_norm(x), rel=1e-5, abs=1e-30)


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
    assert value == pytest.approx(reference.multi_l2_norm(xs), rel=1e-5, abs=1e-30)


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

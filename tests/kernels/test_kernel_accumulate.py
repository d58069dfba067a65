"""Every accumulation kernel on every CPU path equals the NumPy reference bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dtypes import BFLOAT16, FLOAT16, FLOAT32
from tests.kernels.kernel_cases import (
    CPU_PATHS,
    array,
    assert_same_bits,
    copies,
    offsets,
    on_path,
    pairs,
    scales,
    seeds,
    sizes,
)

PLAIN = ("add_scale", "copy_scale")
COMPENSATED = ("add_scale_compensated", "copy_scale_compensated")


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("kernel", PLAIN)
@given(pair=pairs, n=sizes, offset=offsets, scale=scales, seed=seeds)
def test_plain_kernel_matches_reference(path, kernel, pair, n, offset, scale, seed):
    rng = np.random.default_rng(seed)
    acc = array(rng, n, pair[0], offset)
    g = array(rng, n, pair[1], offset)
    (expected,) = copies(acc, offset=offset)
    flag, expected_flag = K.new_flag(acc), K.new_flag(acc)
    getattr(reference, kernel)(expected, g, scale, expected_flag)
    with on_path(path):
        getattr(K, kernel)(acc, g, scale, flag)
    assert_same_bits(acc, expected, f"{kernel} {pair} n={n} offset={offset} scale={scale}")
    assert flag[0] == expected_flag[0] == 0


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("kernel", COMPENSATED)
@given(pair=pairs, n=sizes, offset=offsets, scale=scales, seed=seeds)
def test_compensated_kernel_matches_reference(path, kernel, pair, n, offset, scale, seed):
    rng = np.random.default_rng(seed)
    acc = array(rng, n, pair[0], offset)
    comp = array(rng, n, pair[0], offset, magnitude=1e-7)
    g = array(rng, n, pair[1], offset)
    expected, expected_comp = copies(acc, comp, offset=offset)
    getattr(reference, kernel)(expected, expected_comp, g, scale)
    with on_path(path):
        getattr(K, kernel)(acc, comp, g, scale)
    assert_same_bits(acc, expected, f"{kernel} acc {pair} n={n}")
    assert_same_bits(comp, expected_comp, f"{kernel} comp {pair} n={n}")


@pytest.mark.parametrize("path", CPU_PATHS)
@given(g_dtype=st.sampled_from([FLOAT16, BFLOAT16]), n=sizes, offset=offsets, scale=scales, seed=seeds)
def test_cast_add_scale_matches_reference(path, g_dtype, n, offset, scale, seed):
    rng = np.random.default_rng(seed)
    acc = array(rng, n, FLOAT32, offset)
    g = array(rng, n, g_dtype, offset)
    (expected,) = copies(acc, offset=offset)
    reference.cast_add_scale(expected, g, scale)
    with on_path(path):
        K.cast_add_scale(acc, g, scale)
    assert_same_bits(acc, expected, f"cast_add_scale {g_dtype} n={n}")


@pytest.mark.parametrize("path", CPU_PATHS)
def test_half_subnormals_inf_and_nan_widen_exactly(path):
    # every float16 bit pattern, so the hand-written conversion is checked in full
    g = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    acc = np.zeros(g.size, np.float32)
    with on_path(path):
        K.copy_scale(acc, g, 1.0)
    assert_same_bits(acc, g.astype(np.float32), "float16 -> float32")
    b = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(BFLOAT16)
    with on_path(path):
        K.copy_scale(acc, b, 1.0)
    assert_same_bits(acc, b.astype(np.float32), "bfloat16 -> float32")


@pytest.mark.parametrize("path", CPU_PATHS)
def test_shapes_may_differ_when_sizes_match(path):
    rng = np.random.default_rng(0)
    acc = array(rng, 24, FLOAT32).reshape(2, 3, 4)
    g = array(rng, 24, FLOAT32).reshape(6, 4)
    expected = acc.copy()
    reference.add_scale(expected, g, 0.5)
    with on_path(path):
        K.add_scale(acc, g, 0.5)
    assert acc.shape == (2, 3, 4)
    assert_same_bits(acc, expected)


@pytest.mark.parametrize("path", CPU_PATHS)
def test_scale_is_rounded_to_the_accumulator_dtype_once(path):
    # 0.1 is not a float32; every path must multiply by float32(0.1), not by 0.1
    acc = np.zeros(5, np.float32)
    g = np.array([1, 3, 7, 1e8, 3e-5], np.float32)
    with on_path(path):
        K.copy_scale(acc, g, 0.1)
    assert_same_bits(acc, np.float32(0.1) * g)


def test_default_path_is_native():
    assert K.native_available()
    assert K.kernel_path() in ("native", "reference", "emulated")

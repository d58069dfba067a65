"""Stochastic rounding into a bfloat16 accumulator, and bfloat16 accumulators rounded to nearest:
the Philox stream against Random123's known answers, every path against the NumPy reference bit
for bit whatever the thread count or launch shape, the expected value of a stochastically
rounded sum against the exact one, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import reference, rounding
from minitorch_accum.kernels.dtypes import BFLOAT16, FLOAT16, FLOAT32
from minitorch_accum.kernels.launch import table_limits
from tests.kernels.kernel_cases import CPU_PATHS, array, assert_same_bits, copies, offsets, on_path, scales, seeds

SINGLE = ("add_scale_stochastic", "copy_scale_stochastic", "cast_add_scale_stochastic")
GRADIENTS = {"add_scale_stochastic": (FLOAT32, FLOAT16, BFLOAT16),
             "copy_scale_stochastic": (FLOAT32, FLOAT16, BFLOAT16),
             "cast_add_scale_stochastic": (FLOAT16, BFLOAT16)}
# around the 8-element packs (one Philox block), the 1024-element tiles of the native loop, the
# 4096-element spans of its threads, the 512-thread blocks and the 65536-element chunks
SIZES = [0, 1, 7, 8, 9, 15, 17, 1023, 1025, 4097, 65537, 70001]
sizes = st.one_of(st.sampled_from(SIZES), st.integers(0, 3000))
stream_offsets = st.one_of(st.sampled_from([0, 1, 5, 8, 2**32 * 8 - 3, 2**61]), st.integers(0, 2**40))
# |z| beyond this happens once in a million runs to a standard normal (two-sided): the statistical
# tests' false-failure rate
Z_ONE_IN_A_MILLION = 4.89


# ----------------------------------------------------------------------------- the stream


def test_philox_gives_random123s_known_answers():
    # Random123's kat_vectors for philox4x32_10: (counter, key) -> output
    known = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]
    for counter, key, expected in known:
        assert tuple(int(w) for w in rounding.philox4x32_10([counter], key)[0]) == expected


def test_an_elements_bits_depend_on_its_stream_index_alone():
    whole = rounding.rounding_bits(7, 3, 2, 0, 1000)
    assert np.array_equal(rounding.rounding_bits(7, 3, 2, 13, 500), whole[13:513])
    block = rounding.philox4x32_10([[1, 0, 2, 3]], (7, 0))[0]  # elements 8..15: block 1 at (micro-batch 2, window 3)
    halves = [int(block[w]) >> (16 * h) & 0xFFFF for w in range(4) for h in range(2)]
    assert whole[8:16].tolist() == halves
    # every key word changes the bits
    for other in [(8, 3, 2), (7, 4, 2), (7, 3, 1), (7 + 2**32, 3, 2)]:
        assert not np.array_equal(rounding.rounding_bits(*other, 0, 1000), whole)


# ------------------------------------------------------------------------- the roundings


def test_rounding_to_nearest_is_ml_dtypes_for_every_finite_value_and_quiets_nan():
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32),
                           np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x7F7F7FFF, 0x00008000, 0x80018000],
                                    np.uint32)])  # ties, the largest values, subnormal ties
    x = bits.view(np.float32)
    finite = np.isfinite(x)
    assert np.array_equal(rounding.round_nearest(x)[finite], x[finite].astype(BFLOAT16).view(np.uint16))
    nans = np.array([0x7F800001, 0x7FC00000, 0xFFFFFFFF, 0x7FFF0001], np.uint32)
    assert rounding.round_nearest(nans.view(np.float32)).tolist() == [0x7FC0, 0x7FC0, 0xFFFF, 0x7FFF]


def test_stochastic_rounding_rounds_up_exactly_for_the_discarded_fraction():
    x = np.array([0x3F800000, 0x3F801234, 0xBF80FFFF, 0x00000001, 0x7F7FFFFF, 0x7F800000], np.uint32)
    for r in (0, 1, 0x1234, 0xEDCB, 0xEDCC, 0xFFFF):
        got = rounding.round_stochastic(x.view(np.float32), np.full(x.size, r))
        up = (x & 0xFFFF) + r >= 0x10000
        assert got.tolist() == ((x >> 16) + up).tolist(), r  # a value bf16 holds (low half 0) never moves


# ------------------------------------------------------------- every path, bit for bit


def _case(rng, kernel, n, offset, g_dtype):
    acc = array(rng, n, BFLOAT16, offset)
    g = array(rng, n, g_dtype, offset)
    return acc, g


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("kernel", SINGLE)
@given(n=sizes, offset=offsets, scale=scales, seed=seeds, stream=stream_offsets, data=st.data())
def test_stochastic_kernel_matches_reference(path, kernel, n, offset, scale, seed, stream, data):
    rng = np.random.default_rng(seed)
    g_dtype = data.draw(st.sampled_from(GRADIENTS[kernel]))
    acc, g = _case(rng, kernel, n, offset, g_dtype)
    (expected,) = copies(acc, offset=offset)
    key = (seed * 2**31 + 5, seed % 2**32, (seed // 7) % 2**32)
    flag, expected_flag = K.new_flag(acc), K.new_flag(acc)
    getattr(reference, kernel)(expected, g, scale, *key, stream, expected_flag)
    with on_path(path):
        getattr(K, kernel)(acc, g, scale, *key, offset=stream, flag=flag)
    assert_same_bits(acc, expected, f"{kernel} {g_dtype} n={n} offset={offset} stream={stream}")
    assert flag[0] == expected_flag[0] == 0


@pytest.mark.parametrize("kernel", ["add_scale", "copy_scale", "cast_add_scale"])
@pytest.mark.parametrize("path", CPU_PATHS)
@given(n=sizes, offset=offsets, scale=scales, seed=seeds, data=st.data())
def test_a_bfloat16_accumulator_rounds_the_float32_sum_to_nearest(path, kernel, n, offset, scale, seed, data):
    rng = np.random.default_rng(seed)
    g_dtype = data.draw(st.sampled_from((FLOAT16, BFLOAT16) if kernel == "cast_add_scale" else
                                        (FLOAT32, FLOAT16, BFLOAT16)))
    acc, g = _case(rng, kernel, n, offset, g_dtype)
    start = acc.astype(np.float32)
    with on_path(path), np.errstate(over="ignore"):
        getattr(K, kernel)(acc, g, scale)
        total = np.float32(scale) * g.astype(np.float32)
        total = total if kernel == "copy_scale" else start + total
    assert_same_bits(acc, total.astype(BFLOAT16), f"{kernel} {g_dtype} n={n}")  # ml_dtypes' rounding


@pytest.mark.parametrize("kernel", ["add_scale_stochastic", "add_scale"])
def test_every_thread_count_and_launch_shape_gives_the_same_bits(kernel):
    rng = np.random.default_rng(3)
    n = 3 * 65536 + 1001  # several spans per thread, chunks, an odd tail
    acc, g = array(rng, n, BFLOAT16), array(rng, n, FLOAT32)
    key = (2**40 + 3, 9, 4, 77) if kernel.endswith("stochastic") else ()
    expected = acc.copy()
    getattr(reference, kernel)(expected, g, 0.3, *key)
    threads = K.native_threads()
    try:
        for count in (1, 2):
            K.set_native_threads(count)
            got = acc.copy()
            with on_path("native"):
                getattr(K, kernel)(got, g, 0.3, *key)
            assert_same_bits(got, expected, f"native, {count} threads")
    finally:
        K.set_native_threads(threads or 0)
    for grid, block in ((1, 1), (3, 33), (7, 256), (None, 1024)):
        got = acc.copy()
        with on_path("emulated", grid=grid, block=block):
            getattr(K, kernel)(got, g, 0.3, *key)
        assert_same_bits(got, expected, f"emulated, grid {grid} x block {block}")


@pytest.mark.parametrize("path", CPU_PATHS)
@pytest.mark.parametrize("kernel", ["add_scale_stochastic", "copy_scale_stochastic", "cast_add_scale_stochastic"])
@given(sizes=st.lists(st.sampled_from(SIZES[:9] + [3000]), max_size=7), seed=seeds, numbered=st.booleans())
def test_multi_equals_per_tensor_at_the_same_stream_offsets(path, kernel, sizes, seed, numbered):
    rng = np.random.default_rng(seed)
    g_dtype = BFLOAT16 if kernel.startswith("cast") else FLOAT32
    accs = [array(rng, n, BFLOAT16, int(rng.integers(0, 4))) for n in sizes]
    gs = [array(rng, n, g_dtype) for n in sizes]
    # without offsets the list is numbered as one array: each tensor starts where the one before ended
    firsts = [int(rng.integers(0, 2**40)) for _ in sizes] if numbered else [sum(sizes[:i]) for i in range(len(sizes))]
    expected = [copies(a)[0] for a in accs]
    for e, g, first in zip(expected, gs, firsts, strict=True):
        getattr(reference, kernel)(e, g, 0.7, seed, 2, 5, first)
    with on_path(path), table_limits(max_tensors=3, max_blocks=2):
        getattr(K, f"multi_{kernel}")(accs, gs, 0.7, seed, 2, 5, firsts if numbered else None)
    for i, (a, e) in enumerate(zip(accs, expected, strict=True)):
        assert_same_bits(a, e, f"multi_{kernel} tensor {i} n={sizes[i]}")


@pytest.mark.parametrize("path", CPU_PATHS)
def test_the_flag_reports_a_nonfinite_gradient(path):
    g = np.array([1.0, np.inf, 2.0], np.float32)
    acc, flag = np.zeros(3, BFLOAT16), K.new_flag(np.zeros(1))
    with on_path(path):
        K.add_scale_stochastic(acc, g, 1.0, 1, 2, 3, flag=flag)
    assert flag[0] == 1 and np.isinf(acc.astype(np.float32)[1])


# ------------------------------------------------------------------------ the statistics


def _z(values: np.ndarray, exact: float, variance_bound: float) -> float:
    """How many standard errors the mean of ``values`` lies from ``exact``, with a bound on the
    variance of one value (so the z used overstates none)."""
    return float((values.astype(np.float64).mean() - exact) / math.sqrt(variance_bound / values.size))


@pytest.mark.parametrize("path", CPU_PATHS)
def test_a_stochastically_rounded_sum_equals_the_exact_sum_in_expectation(path):
    # 256 additions of 2^-12 to 1: each is 1/32 of a unit of the sum (bf16 holds 8 significant bits,
    # a unit at 1 is 2^-7), so to nearest every one is lost and the sum stays 1; stochastically each
    # is kept with probability 1/32 (the discarded fraction), and the sum is exact in expectation.
    # 2^17 elements, each its own stream index, are 2^17 independent sums: their mean is within
    # 4.89 standard errors of the exact 1.0625 but for a chance of 1e-6 (normal approximation;
    # the variance used, k units^2 / 4, bounds the true one, so the real chance is smaller).
    n, k, y = 2**17, 256, 2.0**-12
    exact = 1.0 + k * y
    g = np.full(n, y, np.float32)
    acc, nearest = np.ones(n, BFLOAT16), np.ones(n, BFLOAT16)
    with on_path(path):
        for micro_batch in range(k):
            K.add_scale_stochastic(acc, g, 1.0, 2024, 0, micro_batch)
            K.add_scale(nearest, g, 1.0)
    unit = 2.0**-7  # a unit of bf16 in [1, 2), where every sum stays
    bound = k * unit**2 / 4  # each rounding's variance is p (1 - p) units^2 <= 1/4
    assert abs(_z(acc.astype(np.float64), exact, bound)) < Z_ONE_IN_A_MILLION
    # the same test sees round-to-nearest's bias: its sum never left 1
    assert np.all(nearest.astype(np.float64) == 1.0)
    assert abs(_z(nearest.astype(np.float64), exact, bound)) > 100


def test_one_rounding_is_unbiased_for_values_of_every_magnitude_and_sign():
    # one value per element, between two bf16 neighbours (sign, exponent, discarded bits drawn);
    # sum over elements of (rounded - x) / unit: mean 0, variance sum p (1 - p) <= n / 4
    rng = np.random.default_rng(11)
    n = 2**18
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bits = bits & np.uint32(0x807FFFFF) | (rng.integers(1, 254, n).astype(np.uint32) << np.uint32(23))  # finite
    x = bits.view(np.float32)
    acc = np.zeros(n, BFLOAT16)
    K.copy_scale_stochastic(acc, x, 1.0, 99, 1, 0)
    lower = (bits & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    unit = np.abs(((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32).astype(np.float64) - lower)
    errors = (np.abs(acc.astype(np.float64)) - np.abs(x.astype(np.float64))) / unit
    p = (np.abs(x.astype(np.float64)) - np.abs(lower)) / unit
    z = errors.sum() / math.sqrt(float((p * (1 - p)).sum()))
    assert abs(z) < Z_ONE_IN_A_MILLION
    assert set(np.unique(np.round(errors + p, 9))) <= {0.0, 1.0}  # always one of the two neighbours


# -------------------------------------------------------------------------- the refusals


@pytest.mark.parametrize("path", CPU_PATHS)
def test_bad_inputs_are_refused_alike_on_every_path(path):
    acc, g = np.zeros(4, BFLOAT16), np.zeros(4, np.float32)
    cases = [
        (TypeError, r"add_scale_stochastic: acc \(shape \(4,\), float32\) must be bfloat16: stochastic rounding",
         lambda: K.add_scale_stochastic(np.zeros(4, np.float32), g, 1.0, 1, 2, 3)),
        (TypeError, r"cast_add_scale_stochastic: g \(shape \(4,\), float32\) must be float16 or bfloat16",
         lambda: K.cast_add_scale_stochastic(acc, g, 1.0, 1, 2, 3)),
        (ValueError, r"add_scale_stochastic: seed must be in \[0, 2\*\*64\), got -1",
         lambda: K.add_scale_stochastic(acc, g, 1.0, -1, 2, 3)),
        (ValueError, r"add_scale_stochastic: seed must be in \[0, 2\*\*64\), got 18446744073709551616",
         lambda: K.add_scale_stochastic(acc, g, 1.0, 2**64, 2, 3)),
        (ValueError, r"add_scale_stochastic: window must be in \[0, 2\*\*32\), got 4294967296",
         lambda: K.add_scale_stochastic(acc, g, 1.0, 1, 2**32, 3)),
        (TypeError, "copy_scale_stochastic: micro_batch must be an int, got float",
         lambda: K.copy_scale_stochastic(acc, g, 1.0, 1, 2, 3.0)),
        (TypeError, "add_scale_stochastic: seed must be an int, got bool",
         lambda: K.add_scale_stochastic(acc, g, 1.0, True, 2, 3)),
        (TypeError, "add_scale_stochastic: offset must be an int, got str",
         lambda: K.add_scale_stochastic(acc, g, 1.0, 1, 2, 3, offset="0")),
        (ValueError, r"multi_add_scale_stochastic: accs, gs and offsets must have the same length, got 1, 1 and 2",
         lambda: K.multi_add_scale_stochastic([acc], [g], 1.0, 1, 2, 3, [0, 8])),
        (ValueError, r"multi_add_scale_stochastic: offsets\[0\] must be in \[0, 2\*\*64\), got -8",
         lambda: K.multi_add_scale_stochastic([acc], [g], 1.0, 1, 2, 3, [-8])),
        (TypeError, "multi_copy_scale_stochastic: offsets must be a list or tuple of arrays, got int",
         lambda: K.multi_copy_scale_stochastic([acc], [g], 1.0, 1, 2, 3, 0)),
        (ValueError, r"add_scale_stochastic: acc \(shape \(4,\), bfloat16\) and g \(shape \(3,\), float32\) must have",
         lambda: K.add_scale_stochastic(acc, g[:3], 1.0, 1, 2, 3)),
        (ValueError, r"add_scale_stochastic: acc \(shape \(4,\), bfloat16\) and g \(shape \(4,\), bfloat16\) share",
         lambda: K.add_scale_stochastic(acc, acc, 1.0, 1, 2, 3)),
        # a bfloat16 buffer has no compensated kernel: its pairs are not among the supported ones
        (TypeError, r"add_scale_compensated: unsupported dtypes acc \(shape \(4,\), bfloat16\) with g .*"
                    r"\(float64, float32\)$",
         lambda: K.add_scale_compensated(acc, acc.copy(), g, 1.0)),
    ]
    for error, message, call in cases:
        with on_path(path), pytest.raises(error, match=message):
            call()
    assert np.all(acc.view(np.uint16) == 0)  # nothing was written


def test_a_numpy_integer_is_an_int_and_the_bounds_are_inclusive_below():
    acc, g = np.zeros(2, BFLOAT16), np.ones(2, np.float32)
    expected = acc.copy()
    reference.add_scale_stochastic(expected, g, 0.5, 2**64 - 1, 2**32 - 1, 0, 2**64 - 16)
    for path in CPU_PATHS:
        got = acc.copy()
        with on_path(path):
            K.add_scale_stochastic(got, g, 0.5, np.uint64(2**64 - 1), np.int64(2**32 - 1), 0, offset=2**64 - 16)
        assert_same_bits(got, expected, path)

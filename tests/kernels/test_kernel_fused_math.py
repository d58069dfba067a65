"""The fused kernels' own exp, log and erf (csrc/fused_math.cuh): the double functions accurate to
float64 rounding, the float functions (expf, its double-float form, logf) to float32 rounding,
all repeated bit for bit by their NumPy twin (kernels/fused_math.py), whose coefficients are the
header's. The float32 kernels' error bounds are in test_kernel_fused_accuracy.py."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import fused_math
from minitorch_accum.kernels.dispatch import native
from minitorch_accum.kernels.sources import csrc_dir
from tests.kernels.kernel_cases import assert_same_bits

needs_native = pytest.mark.skipif(not K.native_available(), reason="needs the native extension")

RNG = np.random.default_rng(20261203)
# uniform over the interesting range, normal (most GELU inputs), tiny magnitudes down to subnormals
F64_SAMPLE = np.concatenate([RNG.uniform(-7, 7, 100_000), RNG.standard_normal(50_000) * 2,
                             np.linspace(-6.5, 6.5, 20_001), 10.0 ** RNG.uniform(-300, 0, 10_000)])
F32_SAMPLE = np.concatenate([RNG.uniform(-5, 5, 150_000), RNG.standard_normal(100_000),
                             10.0 ** RNG.uniform(-44, 0, 20_000)]).astype(np.float32)


def ulps_f64(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|actual - exact| in units of the last place of exact (normal results)."""
    return np.abs(actual - exact) / np.ldexp(1.0, np.frexp(exact)[1] - 53)


def ulps_f32(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Distance in representable float32 values (the bit patterns of same-signed floats are ordered)."""
    return np.abs(actual.view(np.int32).astype(np.int64) - exact.view(np.int32).astype(np.int64))


def test_erf_is_within_one_ulp_in_float64_of_math_erf():
    # math.erf is itself within an ulp; against mpmath the worst value here is 0.95 ulp
    exact = np.array([math.erf(v) for v in F64_SAMPLE])
    ours = fused_math.erf(F64_SAMPLE)
    nonzero = exact != 0
    assert ulps_f64(ours[nonzero], exact[nonzero]).max() <= 1.0
    assert np.array_equal(ours[~nonzero], exact[~nonzero])
    subnormal = 10.0 ** RNG.uniform(-323, -308, 2000)
    exact_subnormal = np.array([math.erf(v) for v in subnormal])
    assert (np.abs(fused_math.erf(subnormal) - exact_subnormal) <= 2.0**-1074).all()


def test_erf_of_float32_values_rounds_correctly():
    # the erf binding computes a float32 array's erf in double and rounds once
    exact = np.array([math.erf(float(v)) for v in F32_SAMPLE]).astype(np.float32)
    ours = fused_math.erf(F32_SAMPLE.astype(np.float64)).astype(np.float32)
    distance = ulps_f32(ours, exact)
    assert distance.max() <= 1
    assert np.count_nonzero(distance) <= 2  # of 270,000: 0 measured


def test_erf_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310, 5.95, 6.0, 27.0, -40.0])
    y = fused_math.erf(x)
    assert np.array_equal(np.signbit(y[:2]), [False, True]) and (y[:2] == 0).all()
    assert y[2] == 1.0 and y[3] == -1.0 and np.isnan(y[4])
    assert y[5] == 5e-324  # 2/sqrt(pi) times the least subnormal rounds back to it
    assert y[6] < 0 and y[8] == 1.0 and y[9] == 1.0 and y[10] == -1.0


@needs_native
def test_native_erf_is_its_numpy_twin_bit_for_bit():
    for dtype, sample in ((np.float64, F64_SAMPLE), (np.float32, F32_SAMPLE)):
        x = np.concatenate([sample.astype(dtype), np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], dtype)])
        out = np.empty_like(x)
        native().erf(x, out)
        assert_same_bits(out, fused_math.erf(x.astype(np.float64)).astype(dtype), f"erf {dtype.__name__}")


def test_exp_is_within_one_ulp_and_keeps_subnormals():
    y = np.concatenate([RNG.uniform(-707, 709, 20_000), RNG.uniform(-40, 1, 20_000)])
    exact = np.array([math.exp(v) for v in y])
    assert ulps_f64(fused_math.exp(y), exact).max() <= 1.0
    tiny = RNG.uniform(-745, -708.5, 2000)
    exact_tiny = np.array([math.exp(v) for v in tiny])
    assert (np.abs(fused_math.exp(tiny) - exact_tiny) <= 2.0**-1074).all()
    edges = fused_math.exp(np.array([-np.inf, np.inf, np.nan, 710.0, -746.0, 0.0, -0.0]))
    assert edges[0] == 0 and edges[1] == np.inf and np.isnan(edges[2]) and edges[3] == np.inf
    assert edges[4] == 0 and edges[5] == 1.0 and edges[6] == 1.0


def test_float_exp_of_float32_softmax_terms_is_within_one_ulp_of_float32():
    y = np.concatenate([RNG.uniform(-87, 88, 100_000), RNG.uniform(-30, 0, 100_000)]).astype(np.float32)
    exact = np.array([math.exp(float(v)) for v in y]).astype(np.float32)
    assert ulps_f32(fused_math.expf(y), exact).max() <= 1
    tiny = RNG.uniform(-103, -87.5, 5000).astype(np.float32)  # subnormal results round once
    exact_tiny = np.array([math.exp(float(v)) for v in tiny]).astype(np.float32)
    assert ulps_f32(fused_math.expf(tiny), exact_tiny).max() <= 1
    edges = fused_math.expf(np.array([-np.inf, np.inf, np.nan, 89.0, -104.0, 0.0], np.float32))
    assert edges[0] == 0 and edges[1] == np.inf and np.isnan(edges[2]) and edges[3] == np.inf
    assert edges[4] == 0 and edges[5] == 1.0


def test_float_exp_of_a_sum_of_two_floats_is_within_one_ulp_of_float32():
    # e^(hi + lo), lo below hi's last place: the form phi(x) = e^(-x^2 / 2) takes, its square exact in two floats
    hi = RNG.uniform(-103, 88, 100_000).astype(np.float32)
    lo = (hi.astype(np.float64) * RNG.uniform(-2**-24, 2**-24, hi.size)).astype(np.float32)
    exact = np.exp(hi.astype(np.float64) + lo.astype(np.float64)).astype(np.float32)
    assert ulps_f32(fused_math.expf_sum(hi, lo), exact).max() <= 1
    assert np.array_equal(fused_math.expf_sum(hi, 0.0), fused_math.expf(hi))


def test_log_of_a_softmax_sum_is_within_one_ulp():
    s = np.concatenate([RNG.uniform(1, 3, 20_000), np.exp(RNG.uniform(0, 700, 20_000)), [1.0, 2.0, 65.0]])
    exact = np.array([math.log(v) for v in s])
    nonzero = exact != 0
    assert ulps_f64(fused_math.log_sum(s)[nonzero], exact[nonzero]).max() <= 1.0
    assert fused_math.log_sum(np.array([1.0]))[0] == 0.0
    edges = fused_math.log_sum(np.array([0.0, np.inf, np.nan]))
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2])


def test_float_log_of_a_softmax_sum_is_within_one_ulp_of_float32():
    s = np.concatenate([RNG.uniform(1, 3, 50_000), np.exp(RNG.uniform(0, 88, 50_000)), [1.0, 2.0, 65.0]])
    s = s.astype(np.float32)
    exact = np.log(s.astype(np.float64)).astype(np.float32)
    assert ulps_f32(fused_math.log_sum(s), exact).max() <= 1
    assert fused_math.log_sum(np.array([1.0], np.float32))[0] == 0.0
    edges = fused_math.log_sum(np.array([0.0, np.inf, np.nan], np.float32))
    assert edges[0] == -np.inf and edges[1] == np.inf and np.isnan(edges[2])


def _header_coefficients() -> dict[tuple[str, str], tuple[float, ...]]:
    """{(function, precision): literals} from the Horner calls of MtaFusedPoly (double) and
    MtaFusedPolyf (float) in the header."""
    text = (csrc_dir() / "fused_math.cuh").read_text()
    found = {}
    for struct in re.finditer(r"struct (MtaFusedPolyf?) \{(.*?)\n\};", text, re.S):
        precision, scalar = ("float32", "float") if struct.group(1).endswith("f") else ("float64", "double")
        pattern = rf"static {scalar} (\w+)\({scalar} \w+\) \{{\s*return mta_hornerf?\(\w+, (.*?)\);"
        for fn in re.finditer(pattern, struct.group(2), re.S):
            found[(fn.group(1), precision)] = tuple(float(v.strip().rstrip("f")) for v in fn.group(2).split(","))
    return found


def test_numpy_twin_has_the_headers_coefficients():
    header = _header_coefficients()
    twin = {**{(name, "float64"): c for name, c in fused_math.COEFFICIENTS.items()},
            **{(name, "float32"): c for name, c in fused_math.FLOAT_COEFFICIENTS.items()}}
    assert header == twin and len(header) == 7


@given(st.integers(1, 200), st.integers(0, 3), st.sampled_from([np.float32, np.float64]))
def test_row_and_column_sums_follow_the_lane_and_chunk_order(columns: int, seed: int, dtype: type) -> None:
    # in the array's own dtype: float32 rows are summed in float32
    v = np.random.default_rng(seed).standard_normal((3, columns)).astype(dtype)
    lanes = np.zeros((3, fused_math.ROW_LANES), dtype)
    for j in range(columns):  # lane l: columns l, l + 32, ... in order
        lanes[:, j % fused_math.ROW_LANES] += v[:, j]
    w = fused_math.ROW_LANES // 2
    while w:
        lanes = lanes[:, :w] + lanes[:, w : 2 * w]
        w //= 2
    assert_same_bits(fused_math.lane_sums(v), lanes[:, 0], "lane sums")
    rows = np.random.default_rng(seed).standard_normal((columns, 2)).astype(dtype)
    total = np.zeros(2, dtype)
    for start in range(0, columns, fused_math.COLUMN_CHUNK):
        partial = np.zeros(2, dtype)
        for r in range(start, min(columns, start + fused_math.COLUMN_CHUNK)):
            partial = partial + rows[r]
        total = total + partial
    assert_same_bits(fused_math.column_sums(rows), total, "column sums")


def _nearest_float32(x) -> np.float32:
    """The float32 nearest the rational x (ties to an even significand): the exact reference."""
    from fractions import Fraction

    guess = np.float32(float(x))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    best = min(abs(Fraction(float(c)) - x) for c in candidates)
    tied = [c for c in candidates if abs(Fraction(float(c)) - x) == best]
    return min(tied, key=lambda c: int(np.array(c).view(np.uint32)) & 1)


def test_the_references_fused_multiply_add_rounds_once_as_fmaf_does() -> None:
    # float64 rounds a b + c first; round-to-odd keeps the second rounding correct, halfway cases included
    from fractions import Fraction

    rng = np.random.default_rng(11)
    a = rng.standard_normal(3000).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    c = rng.standard_normal(3000).astype(np.float32)
    # c that puts a b + c within a hair of a float32 halfway point: -a b rounded, then nudged
    near = (-(a.astype(np.float64) * b)).astype(np.float32)
    c[:1000] = near[:1000] * np.float32(1 + 2**-23) + np.float32(2**-30)
    c[1000:1500] = np.float32(2**-70)  # a lost part far below the product's last bit
    # double rounding's own case: a b + c = 2^40 + 2^17 + 2^16 - 2^-24, just under a float32 midpoint,
    # which float64 rounds onto the midpoint, and ties-to-even then carries up (the exact answer is down)
    a[1500:1502] = np.float32(2.0**8 * (1 + 2.0**-20))
    b[1500:1502] = np.float32([2.0**8 * (1 - 2.0**-20), -(2.0**8) * (1 - 2.0**-20)])
    c[1500:1502] = np.float32([2.0**40 + 2.0**17, -(2.0**40 + 2.0**17)])
    # the same on both sides of 800 more midpoints, c's last bit odd and even, the lost part either sign
    m = rng.integers(0, 2**23, 200).astype(np.float64)
    for k, (sign_b, sign_c) in enumerate(((1, 1), (-1, -1), (1, -1), (-1, 1))):
        rows = slice(1502 + 200 * k, 1702 + 200 * k)
        a[rows] = np.float32(2.0**8 * (1 + 2.0**-20))
        b[rows] = np.float32(sign_b * 2.0**8 * (1 - 2.0**-20))
        c[rows] = (sign_c * (2.0**40 + m * 2.0**17)).astype(np.float32)
    got = fused_math.fma32(a, b, c)
    assert got[1500] == np.float32(2.0**40 + 2.0**17) and got[1501] == -got[1500]
    # c given as a Python float is c's float32 (as fmaf takes it)
    assert fused_math.fma32(np.float32([3.0]), np.float32(1.0), 0.1)[0] == np.float32(3.0) + np.float32(0.1)
    for x, y, z, r in zip(a, b, c, got, strict=True):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        assert r.tobytes() == _nearest_float32(exact).tobytes(), (x, y, z)
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    np.testing.assert_array_equal(fused_math.fma32(specials, np.float32(2.0), np.float32(1.0)),
                                  np.array([np.inf, -np.inf, np.nan, 1.0, 1.0], np.float32))
    negative_zero = fused_math.fma32(np.float32([-0.0]), np.float32(1.0), np.float32(-0.0))
    assert negative_zero.tobytes() == np.float32([-0.0]).tobytes()

"""The element math of csrc/fused_math.cuh in NumPy, operation for operation.

Each function repeats its C++ twin one IEEE operation at a time, in the same order and in
the same dtype (float32 arrays in float32, float64 arrays in float64: NumPy rounds each
float32 operation once, as the kernels do), so the NumPy reference of the fused kernels gives
the native, emulated and CUDA paths' bits. The coefficients are the header's; a test reads
them from the header and compares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "COEFFICIENTS",
    "COLUMN_CHUNK",
    "FLOAT_COEFFICIENTS",
    "ROW_LANES",
    "column_sums",
    "erf",
    "exp",
    "expf",
    "expf_sum",
    "gelu",
    "gelu_derivative",
    "horner",
    "lane_sums",
    "log_sum",
    "normal_parts",
    "softmax_exp",
    "softmax_shift",
]

ROW_LANES = 32  # MTA_ROW_LANES
COLUMN_CHUNK = 64  # MTA_COLUMN_CHUNK

_MAGIC = 6755399441055744.0
_MAGIC_BITS = np.array(_MAGIC).view(np.int64)
_LN2_HI = 0.6931471803691238
_LN2_LO = 1.9082149292705877e-10
_MAX = 1.79769313486231570e308

# name -> coefficients, lowest degree first (MtaFusedPoly: the double functions)
COEFFICIENTS: dict[str, tuple[float, ...]] = {
    "erf_small": (-0.03453126133013269, -0.2810721780454342, 0.07940998675593483, -0.018283884489152538,
                  0.0034802744966656173, -0.0005611894221277441, 7.829649525455377e-05, -9.614808525709598e-06,
                  1.0536449530013862e-06, -1.0420476859445043e-07, 9.38762931097412e-09, -7.764167415589177e-10,
                  5.958930343261137e-11, -4.230945824295338e-12),
    "erfc_exponent": (-0.7274922853522042, 1.327601228934298, 0.23442498156110278, -0.3441290896194704,
                      -0.21311761637261442, 0.24359275586583976, 0.19619415923712247, -0.2657747698285945,
                      -0.16963712658886962, 0.3468585916222164, 0.09429941505793459, -0.4551979790631505,
                      0.07621143792160973, 0.52256130456081, -0.3547259136137361, -0.4126653050574088,
                      0.5535888611630921),
    "exp_tail": (0.5, 0.1666666666666667, 0.04166666666666667, 0.008333333333326141, 0.0013888888888883752,
                 0.00019841269874800493, 2.4801587325533363e-05, 2.7557255425746435e-06, 2.7557273661348637e-07,
                 2.510520637395701e-08, 2.0914679376583935e-09),
    "log_tail": (0.6726167307481199, 0.4085574242422547, 0.29576803635075294, 0.2332686668383402,
                 0.193586961400031, 0.1661756523517976, 0.14611944817451095, 0.13081899327100993,
                 0.1188254468445996, 0.10909557969785763),
}

# name -> float32 coefficients as the header writes them (MtaFusedPolyf: the float functions)
FLOAT_COEFFICIENTS: dict[str, tuple[float, ...]] = {
    "exp_tail": (0.5, 0.16666577756404877, 0.041666556149721146, 0.008363173343241215, 0.0013926175888627768),
    "log_tail": (0.6726167, 0.40859532, 0.29579464),
    "normal_tail": (0.6879597, 0.98946255, 0.8426959, 0.25518286, -0.21130294, -0.14358068, 0.10495936,
                    0.06538083, -0.060629837, -0.021887116),
}

_F32 = np.float32


def horner(coefficients: Sequence[float], v: np.ndarray) -> np.ndarray:
    """c[0] + v (c[1] + v (c[2] + ...)), evaluated from the highest coefficient in v's dtype, a
    multiply and an add per step (mta_horner; float32's fuse them: ``hornerf``)."""
    c = [v.dtype.type(x) for x in coefficients]
    r = np.full_like(v, c[-1])
    for ci in c[-2::-1]:
        r = r * v + ci
    return r


def fma32(a: np.ndarray, b: np.ndarray | np.floating, c: np.ndarray | np.floating | float) -> np.ndarray:
    """a b + c rounded once to float32 (fmaf, __fmaf_rn) for float32 operands. NumPy has no fma:
    a b is exact in float64 (24 + 24 bits), the sum with c is rounded to float64 with the sticky
    bit kept (round to odd: an inexact sum whose last bit is even moves one ulp towards the lost
    part, found exactly by TwoSum), and round-to-odd in 53 bits then to nearest in 24 is the
    correctly rounded result (53 >= 24 + 2)."""
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * np.asarray(b, dtype=np.float32).astype(np.float64)
        c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
        s = p + c64
        back = s - p
        lost = (p - (s - back)) + (c64 - back)
        inexact_even = (lost != 0) & np.isfinite(s) & ((s.view(np.int64) & 1) == 0)
        s = np.where(inexact_even, np.nextafter(s, np.where(lost > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def hornerf(coefficients: Sequence[float], v: np.ndarray) -> np.ndarray:
    """mta_hornerf: c[0] + v (c[1] + v (c[2] + ...)) in float32, one fused multiply-add per step."""
    c = [np.float32(x) for x in coefficients]
    r = np.full_like(v, c[-1])
    for ci in c[-2::-1]:
        r = fma32(r, v, ci)
    return r


def _float(name: str) -> tuple[float, ...]:
    return FLOAT_COEFFICIENTS[name]


# ------------------------------------------------------------------ double


def _pow2(k: np.ndarray) -> np.ndarray:
    return ((k + 1023) << 52).view(np.float64)


def exp(y: np.ndarray) -> np.ndarray:
    """e^y of a float64 array (mta_exp): Cody-Waite reduction, the polynomial, two exact
    power-of-two scalings."""
    with np.errstate(all="ignore"):
        y = np.where(y < -746.0, -746.0, y)
        y = np.where(y > 710.0, 710.0, y)
        m = y * 1.4426950408889634 + _MAGIC
        kd = m - _MAGIC
        k = m.view(np.int64) - _MAGIC_BITS
        r = (y - kd * _LN2_HI) - kd * _LN2_LO
        p = 1.0 + (r + (r * r) * horner(COEFFICIENTS["exp_tail"], r))
        k1 = k >> 1
        result: np.ndarray = (np.where(y == -746.0, 0.0, p) * _pow2(k1)) * _pow2(k - k1)
        return result


def _log_sum_double(s: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        bits = s.view(np.uint64)
        mantissa = ((bits & np.uint64(0x000FFFFFFFFFFFFF)) | np.uint64(0x3FF0000000000000)).view(np.float64)
        high = mantissa > 1.4142135623730951
        f = np.where(high, mantissa * 0.5, mantissa)
        e = ((bits >> np.uint64(52)).astype(np.int64) - 1023 + high).astype(np.float64)
        x = f - 1.0
        u = x / (f + 1.0)
        u2 = u * u
        tail = u2 * horner(COEFFICIENTS["log_tail"], u2 - 0.014718625761429707)
        log_f = x - u * (x - tail)
        result = e * _LN2_HI + (log_f + e * _LN2_LO)
        result = np.where(np.isnan(s) | (s > _MAX), s, result)
        return np.where(s == 0.0, -np.inf, result)


def erf(x: np.ndarray) -> np.ndarray:
    """erf(x) of a float64 array (mta_erf): x + x Q(x^2) below 1, 1 - t e^(G(t) - x^2) above,
    1 from 6 on."""
    with np.errstate(all="ignore"):
        a = np.abs(x)
        small = a + a * horner(COEFFICIENTS["erf_small"], a * a - 0.5)
        z = np.where(a > 6.0, 6.0, a)
        t = 2.0 / (2.0 + z)
        g = horner(COEFFICIENTS["erfc_exponent"], t - 0.4583333333333333)
        large = 1.0 - t * exp(g - z * z)
        r = np.where(a < 1.0, small, large)
        r = np.where(a >= 6.0, 1.0, r)
        r = np.where(np.isnan(x), x, r)
        signed: np.ndarray = np.copysign(r, x)
        return signed


# ------------------------------------------------------------------ float


def _pow2f(k: np.ndarray) -> np.ndarray:
    return ((k + 127) << 23).astype(np.int32).view(np.float32)


def expf_sum(y: np.ndarray, lo: np.ndarray | float = 0.0) -> np.ndarray:
    """e^(y + lo) of float32 arrays in float32 arithmetic (mta_expf_sum; lo a small correction)."""
    y = y.astype(np.float32)
    y = np.where(y < _F32(-104.0), _F32(-104.0), y)
    return _expf_clamped(np.where(y > _F32(89.0), _F32(89.0), y), lo)


def _expf_clamped(y: np.ndarray, lo: np.ndarray | float) -> np.ndarray:
    """mta_expf_clamped: e^(y + lo) for float32 y in [-104, 89]."""
    with np.errstate(all="ignore"):
        lo = np.asarray(lo, dtype=np.float32)
        magic = _F32(12582912.0)
        m = y * _F32(1.44269504) + magic
        kd = m - magic
        k = m.view(np.int32) - magic.view(np.int32)
        r = ((y - kd * _F32(0.693145751953125)) - kd * _F32(1.42860677e-06)) + lo
        p = _F32(1.0) + (r + (r * r) * hornerf(_float("exp_tail"), r))
        k1 = k >> 1
        result: np.ndarray = (np.where(y == _F32(-104.0), _F32(0.0), p) * _pow2f(k1)) * _pow2f(k - k1)
        return result


def expf(y: np.ndarray) -> np.ndarray:
    """e^y of a float32 array in float32 arithmetic (mta_expf)."""
    return expf_sum(y, 0.0)


def _log_sum_float(s: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        bits = s.view(np.uint32)
        mantissa = ((bits & np.uint32(0x007FFFFF)) | np.uint32(0x3F800000)).view(np.float32)
        high = mantissa > _F32(1.41421354)
        f = np.where(high, mantissa * _F32(0.5), mantissa)
        e = ((bits >> np.uint32(23)).astype(np.int32) - 127 + high).astype(np.float32)
        x = f - _F32(1.0)
        u = x / (f + _F32(1.0))
        u2 = u * u
        tail = u2 * hornerf(_float("log_tail"), u2 - _F32(0.0147186257))
        log_f = x - u * (x - tail)
        result = e * _F32(0.693145751953125) + (log_f + e * _F32(1.42860677e-06))
        result = np.where(np.isnan(s) | (s > _F32(3.40282347e38)), s, result)
        return np.where(bits == 0, _F32(-np.inf), result)


def log_sum(s: np.ndarray) -> np.ndarray:
    """log s for the sum of a softmax row, s = 0 or s >= 1, in s's dtype (mta_log_sum); 0 gives -inf."""
    return _log_sum_float(s) if s.dtype == np.float32 else _log_sum_double(s)


def _clamp_magnitude(x: np.ndarray, limit: float) -> np.ndarray:
    limit_t = x.dtype.type(limit)
    upper = np.where(x > limit_t, limit_t, x)
    return np.where(upper < -limit_t, -limit_t, upper)


def normal_parts(x: np.ndarray) -> dict[str, np.ndarray]:
    """The parts of Phi(x) and phi(x) of a float32 array in float32 arithmetic (mta_normalf):
    ``pdf``, ``mills`` (Phi(-|x|) = pdf mills), ``x`` (clamped to +-14.5) and ``lower`` (x < 0)."""
    with np.errstate(all="ignore"):
        xc = _clamp_magnitude(x, 14.5)
        z = np.abs(xc)
        z_hi = (z.view(np.uint32) & np.uint32(0xFFFFF000)).view(np.float32)
        z_lo = z - z_hi
        half_square_hi = (z_hi * _F32(-0.5)) * z_hi
        half_square_lo = (z_lo * _F32(-1.0)) * (z_hi + z_lo * _F32(0.5))
        clamped = np.where(half_square_hi < _F32(-104.0), _F32(-104.0), half_square_hi)
        t = _F32(3.0) / (_F32(3.0) + z)
        return {"pdf": _expf_clamped(clamped, half_square_lo) * _F32(0.398942292),
                "mills": t * hornerf(_float("normal_tail"), t - _F32(0.5857)), "x": xc, "lower": x < _F32(0.0)}


def _gelu_normal(x: np.ndarray) -> np.ndarray:
    """x Phi(x) of a float32 array (mta_gelu_normalf)."""
    n = normal_parts(x)
    upper = x * (_F32(1.0) - n["pdf"] * n["mills"])
    lower = (x * n["pdf"]) * n["mills"]
    y: np.ndarray = np.where(n["lower"], lower, upper)
    return y


def _gelu_normal_derivative(x: np.ndarray) -> np.ndarray:
    """Phi(x) + x phi(x) of a float32 array (mta_gelu_derivative_normalf)."""
    n = normal_parts(x)
    upper = (_F32(1.0) - n["pdf"] * n["mills"]) + n["x"] * n["pdf"]
    lower = n["pdf"] * (n["mills"] + n["x"])
    derivative: np.ndarray = np.where(n["lower"], lower, upper)
    return derivative


# ------------------------------------------------------------------ GELU, in x's dtype


def _tanh_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sigma(2u), sigma(2u) (1 - sigma(2u)), x clamped) in x's dtype (mta_gelu_tanh_parts)."""
    t = x.dtype.type
    xc = _clamp_magnitude(x, 12.0 if x.dtype == np.float32 else 30.0)
    cube = (xc * xc) * xc
    u = t(0.7978845608028654) * (xc + t(0.044715) * cube)
    e = (expf if x.dtype == np.float32 else exp)(t(-2.0) * np.abs(u))
    q = t(1.0) / (t(1.0) + e)
    p = e * q
    return np.where(u >= t(0.0), q, p), p * q, xc


def _cdf_double(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + erf(x * 0.7071067811865476))


def gelu(x: np.ndarray, tanh: bool) -> np.ndarray:
    """gelu(x) in x's dtype (mta_gelu_forward_element): x Phi(x), or x sigma(2u) for the tanh form."""
    with np.errstate(all="ignore"):
        if tanh:
            y: np.ndarray = x * _tanh_parts(x)[0]
        elif x.dtype == np.float32:
            y = _gelu_normal(x)
        else:
            y = x * _cdf_double(x)
        return y


def gelu_derivative(x: np.ndarray, tanh: bool) -> np.ndarray:
    """d gelu / dx in x's dtype (mta_gelu_backward_element without its dy)."""
    t = x.dtype.type
    with np.errstate(all="ignore"):
        if tanh:
            s, s_s1, xc = _tanh_parts(x)
            du = t(0.7978845608028654) * (t(1.0) + t(0.134145) * (xc * xc))
            derivative: np.ndarray = s + ((t(2.0) * xc) * s_s1) * du
            return derivative
        if x.dtype == np.float32:
            return _gelu_normal_derivative(x)
        xc = _clamp_magnitude(x, 40.0)
        pdf = 0.3989422804014327 * exp((-0.5 * xc) * xc)
        return _cdf_double(x) + xc * pdf


# ------------------------------------------------------------------ rows


def softmax_exp(d: np.ndarray) -> np.ndarray:
    """e^d of softmax terms in d's dtype (mta_softmax_exp)."""
    return expf(d) if d.dtype == np.float32 else exp(d)


def softmax_shift(row_max: np.ndarray) -> np.ndarray:
    """The row's largest value, or 0 where that is not finite (mta_softmax_shift)."""
    return np.where(np.isfinite(row_max), row_max, row_max.dtype.type(0))


def lane_sums(v: np.ndarray) -> np.ndarray:
    """The sum of each row of a 2-D array, in its dtype and the kernels' order: 32 lane sums
    (lane l adds columns l, l + 32, ... in order), then lane l + w into lane l for w = 16 ... 1.
    The tail's missing columns add +0.0, which changes no partial sum (none is ever -0)."""
    rows, columns = v.shape
    width = -(-columns // ROW_LANES) * ROW_LANES
    padded = np.zeros((rows, width), v.dtype)
    padded[:, :columns] = v
    blocks = padded.reshape(rows, width // ROW_LANES, ROW_LANES)
    with np.errstate(all="ignore"):
        acc = np.zeros((rows, ROW_LANES), v.dtype)
        for j in range(width // ROW_LANES):
            acc = acc + blocks[:, j, :]
        w = ROW_LANES // 2
        while w:
            acc = acc[:, :w] + acc[:, w : 2 * w]
            w //= 2
    return acc[:, 0]


def column_sums(v: np.ndarray) -> np.ndarray:
    """The sum of each column of a 2-D array, in its dtype and the kernels' order: rows in
    order within each chunk of 64 rows, then the chunks' sums in order."""
    rows, columns = v.shape
    chunks = -(-rows // COLUMN_CHUNK)
    padded = np.zeros((chunks * COLUMN_CHUNK, columns), v.dtype)
    padded[:rows] = v
    blocks = padded.reshape(chunks, COLUMN_CHUNK, columns)
    with np.errstate(all="ignore"):
        partial = np.zeros((chunks, columns), v.dtype)
        for r in range(COLUMN_CHUNK):
            partial = partial + blocks[:, r, :]
        total = np.zeros(columns, v.dtype)
        for c in range(chunks):
            total = total + partial[c]
    return total

"""The element math of csrc/fused_math.cuh in NumPy, operation for operation.

Each function repeats its C++ twin one IEEE operation at a time, in the same order and in
float64, so the NumPy reference of the fused kernels gives the native, emulated and CUDA
paths' bits. The coefficients are the header's; a test reads them from the header and
compares. ``precision`` is the dtype a result is rounded to (float32 or float64): it picks
the coefficient set, as the template parameter P does in C++.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "COEFFICIENTS",
    "COLUMN_CHUNK",
    "EXPF_TAIL",
    "ROW_LANES",
    "column_sums",
    "erf",
    "exp",
    "expf",
    "gelu",
    "gelu_derivative",
    "horner",
    "lane_sums",
    "log_sum",
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

# name -> {precision: coefficients, highest degree last} (MtaFusedPoly<P> in the header)
COEFFICIENTS: dict[str, dict[str, tuple[float, ...]]] = {
    "erf_small": {
        "float64": (-0.03453126133013269, -0.2810721780454342, 0.07940998675593483, -0.018283884489152538,
                    0.0034802744966656173, -0.0005611894221277441, 7.829649525455377e-05, -9.614808525709598e-06,
                    1.0536449530013862e-06, -1.0420476859445043e-07, 9.38762931097412e-09, -7.764167415589177e-10,
                    5.958930343261137e-11, -4.230945824295338e-12),
        "float32": (-0.03453126133013269, -0.28107217803106377, 0.07940998675464103, -0.01828388525546938,
                    0.0034802745656599843, -0.0005611783913285922, 7.829550205426472e-05, -9.67358776544459e-06,
                    1.058938064107502e-06),
    },
    "erfc_exponent": {
        "float64": (-0.7274922853522042, 1.327601228934298, 0.23442498156110278, -0.3441290896194704,
                    -0.21311761637261442, 0.24359275586583976, 0.19619415923712247, -0.2657747698285945,
                    -0.16963712658886962, 0.3468585916222164, 0.09429941505793459, -0.4551979790631505,
                    0.07621143792160973, 0.52256130456081, -0.3547259136137361, -0.4126653050574088,
                    0.5535888611630921),
        "float32": (-0.6717940840566923, 1.3452864478954178, 0.18937322741322238, -0.37516483867853173,
                    -0.15796306277878971, 0.2823893067124271, 0.1125784255348416, -0.29954192687973125,
                    -0.03799566328519206, 0.31861925757525267, -0.07539979820771632),
    },
    "exp_tail": {
        "float64": (0.5, 0.1666666666666667, 0.04166666666666667, 0.008333333333326141, 0.0013888888888883752,
                    0.00019841269874800493, 2.4801587325533363e-05, 2.7557255425746435e-06,
                    2.7557273661348637e-07, 2.510520637395701e-08, 2.0914679376583935e-09),
        "float32": (0.4999999999995511, 0.16666666666662586, 0.04166666678626573, 0.00833333334420298,
                    0.0013888839110572009, 0.00019841224599656011, 2.4867870179687727e-05,
                    2.7617564785876086e-06),
    },
    "log_tail": {
        "float64": (0.6726167307481199, 0.4085574242422547, 0.29576803635075294, 0.2332686668383402,
                    0.193586961400031, 0.1661756523517976, 0.14611944817451095, 0.13081899327100993,
                    0.1188254468445996, 0.10909557969785763),
        "float32": (0.6726167307481663, 0.4085574242422963, 0.2957680324923276, 0.23326866338391572,
                    0.1936344533360521, 0.16621817152858928),
    },
}
_ERFC_CENTER = {"float64": 0.4583333333333333, "float32": 0.5}
_ERF_SATURATION = {"float64": 6.0, "float32": 4.0}


def _set(name: str, precision: np.dtype | str) -> tuple[float, ...]:
    return COEFFICIENTS[name][np.dtype(precision).name]


def horner(coefficients: Sequence[float], v: np.ndarray) -> np.ndarray:
    """c[0] + v (c[1] + v (c[2] + ...)), evaluated from the highest coefficient (mta_horner)."""
    r = np.full_like(v, coefficients[-1])
    for c in coefficients[-2::-1]:
        r = r * v + c
    return r


def _pow2(k: np.ndarray) -> np.ndarray:
    return ((k + 1023) << 52).view(np.float64)


def exp(y: np.ndarray, precision: np.dtype | str) -> np.ndarray:
    """e^y (mta_exp): Cody-Waite reduction, the polynomial, two exact power-of-two scalings."""
    with np.errstate(all="ignore"):
        y = np.where(y < -746.0, -746.0, y)
        y = np.where(y > 710.0, 710.0, y)
        m = y * 1.4426950408889634 + _MAGIC
        kd = m - _MAGIC
        k = m.view(np.int64) - _MAGIC_BITS
        r = (y - kd * _LN2_HI) - kd * _LN2_LO
        p = 1.0 + (r + (r * r) * horner(_set("exp_tail", precision), r))
        k1 = k >> 1
        result: np.ndarray = (p * _pow2(k1)) * _pow2(k - k1)
        return result


#: the float exp's polynomial (mta_expf), float32 values
EXPF_TAIL: tuple[float, ...] = (0.5, 0.16666577756404877, 0.041666556149721146, 0.008363173343241215,
                                0.0013926175888627768)
_F32 = np.float32


def _pow2f(k: np.ndarray) -> np.ndarray:
    return ((k + 127) << 23).astype(np.int32).view(np.float32)


def expf(y: np.ndarray) -> np.ndarray:
    """e^y of a float32 array in float32 arithmetic (mta_expf)."""
    with np.errstate(all="ignore"):
        y = y.astype(np.float32)
        wide = y.astype(np.float64)
        y = np.where(wide < -104.0, _F32(-104.0), y)
        y = np.where(wide > 89.0, _F32(89.0), y)
        magic = _F32(12582912.0)
        m = y * _F32(1.44269504) + magic
        kd = m - magic
        k = m.view(np.int32) - magic.view(np.int32)
        r = (y - kd * _F32(0.693145751953125)) - kd * _F32(1.42860677e-06)
        q = np.full_like(r, _F32(EXPF_TAIL[-1]))
        for c in EXPF_TAIL[-2::-1]:
            q = q * r + _F32(c)
        p = _F32(1.0) + (r + (r * r) * q)
        k1 = k >> 1
        result: np.ndarray = (p * _pow2f(k1)) * _pow2f(k - k1)
        return result


def softmax_exp(d: np.ndarray, dtype: np.dtype | str) -> np.ndarray:
    """e^d of softmax terms in float64 (MtaSoftmaxExp): the double exp for float64 logits, the
    float exp of d rounded to float32 for float32 logits."""
    if np.dtype(dtype) == np.float64:
        return exp(d, "float64")
    with np.errstate(all="ignore"):
        return expf(d.astype(np.float32)).astype(np.float64)


def log_sum(s: np.ndarray, precision: np.dtype | str) -> np.ndarray:
    """log s for the sum of a softmax row, s = 0 or s >= 1 (mta_log_sum); 0 gives -inf."""
    with np.errstate(all="ignore"):
        bits = s.view(np.uint64)
        mantissa = ((bits & np.uint64(0x000FFFFFFFFFFFFF)) | np.uint64(0x3FF0000000000000)).view(np.float64)
        high = mantissa > 1.4142135623730951
        f = np.where(high, mantissa * 0.5, mantissa)
        e = ((bits >> np.uint64(52)).astype(np.int64) - 1023 + high).astype(np.float64)
        x = f - 1.0
        u = x / (f + 1.0)
        u2 = u * u
        tail = u2 * horner(_set("log_tail", precision), u2 - 0.014718625761429707)
        log_f = x - u * (x - tail)
        result = e * _LN2_HI + (log_f + e * _LN2_LO)
        result = np.where(np.isnan(s) | (s > _MAX), s, result)
        return np.where(s == 0.0, -np.inf, result)


def erf(x: np.ndarray, precision: np.dtype | str) -> np.ndarray:
    """erf(x) (mta_erf): x + x Q(x^2) below 1, 1 - t e^(G(t) - x^2) above, 1 from saturation."""
    name = np.dtype(precision).name
    with np.errstate(all="ignore"):
        a = np.abs(x)
        small = a + a * horner(_set("erf_small", name), a * a - 0.5)
        top = _ERF_SATURATION[name]
        z = np.where(a > top, top, a)
        t = 2.0 / (2.0 + z)
        g = horner(_set("erfc_exponent", name), t - _ERFC_CENTER[name])
        large = 1.0 - t * exp(g - z * z, name)
        r = np.where(a < 1.0, small, large)
        r = np.where(a >= top, 1.0, r)
        r = np.where(np.isnan(x), x, r)
        signed: np.ndarray = np.copysign(r, x)
        return signed


def _tanh_parts(x: np.ndarray, precision: str) -> tuple[np.ndarray, np.ndarray]:
    cube = (x * x) * x
    u = 0.7978845608028654 * (x + 0.044715 * cube)
    e = exp(-2.0 * np.abs(u), precision)
    q = 1.0 / (1.0 + e)
    p = e * q
    return np.where(u >= 0.0, q, p), p * q


def _cdf(x: np.ndarray, precision: str) -> np.ndarray:
    return 0.5 * (1.0 + erf(x * 0.7071067811865476, precision))


def gelu(x: np.ndarray, tanh: bool, precision: np.dtype | str) -> np.ndarray:
    """gelu(x) in float64 (mta_gelu): x Phi(x), or x sigma(2u) for the tanh form."""
    name = np.dtype(precision).name
    with np.errstate(all="ignore"):
        y: np.ndarray = x * (_tanh_parts(x, name)[0] if tanh else _cdf(x, name))
        return y


def gelu_derivative(x: np.ndarray, tanh: bool, precision: np.dtype | str) -> np.ndarray:
    """d gelu / dx in float64 (mta_gelu_derivative)."""
    name = np.dtype(precision).name
    with np.errstate(all="ignore"):
        if tanh:
            s, s_s1 = _tanh_parts(x, name)
            du = 0.7978845608028654 * (1.0 + 0.134145 * (x * x))
            derivative: np.ndarray = s + ((2.0 * x) * s_s1) * du
            return derivative
        pdf = 0.3989422804014327 * exp((-0.5 * x) * x, name)
        return _cdf(x, name) + x * pdf


def softmax_shift(row_max: np.ndarray) -> np.ndarray:
    """The row's largest value, or 0 where that is not finite (mta_softmax_shift)."""
    return np.where(np.isfinite(row_max), row_max, 0.0)


def lane_sums(v: np.ndarray) -> np.ndarray:
    """The sum of each row of a 2-D float64 array in the kernels' order: 32 lane sums
    (lane l adds columns l, l + 32, ... in order), then lane l + w into lane l for w = 16 ... 1.
    The tail's missing columns add +0.0, which changes no partial sum (none is ever -0)."""
    rows, columns = v.shape
    width = -(-columns // ROW_LANES) * ROW_LANES
    padded = np.zeros((rows, width))
    padded[:, :columns] = v
    blocks = padded.reshape(rows, width // ROW_LANES, ROW_LANES)
    with np.errstate(all="ignore"):
        acc = np.zeros((rows, ROW_LANES))
        for j in range(width // ROW_LANES):
            acc = acc + blocks[:, j, :]
        w = ROW_LANES // 2
        while w:
            acc = acc[:, :w] + acc[:, w : 2 * w]
            w //= 2
    return acc[:, 0]


def column_sums(v: np.ndarray) -> np.ndarray:
    """The sum of each column of a 2-D float64 array in the kernels' order: rows in order
    within each chunk of 64 rows, then the chunks' sums in order."""
    rows, columns = v.shape
    chunks = -(-rows // COLUMN_CHUNK)
    padded = np.zeros((chunks * COLUMN_CHUNK, columns))
    padded[:rows] = v
    blocks = padded.reshape(chunks, COLUMN_CHUNK, columns)
    with np.errstate(all="ignore"):
        partial = np.zeros((chunks, columns))
        for r in range(COLUMN_CHUNK):
            partial = partial + blocks[:, r, :]
        total = np.zeros(columns)
        for c in range(chunks):
            total = total + partial[c]
    return total

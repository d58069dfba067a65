// Element math of the fused layer kernels (GELU, LayerNorm, softmax cross
// entropy), written once for NVRTC, the native CPU loops and the emulator.
//
// Every value is computed in the stored dtype: float32 inputs in float32 (16 lanes to
// an AVX-512 register on the CPU), float64 inputs in float64, each result rounded once
// from that arithmetic. The transcendental functions are our own (exp, log, erf, the
// normal distribution): polynomials evaluated one IEEE operation at a time (a float32
// Horner step is one fused multiply-add, written out: mta_fmaf), branch-free,
// so the host compiler vectorizes them, every compiler rounds them alike, and
// kernels/fused_reference.py repeats them operation for operation in NumPy, in the same
// dtype (bit for bit). The coefficients are near-minimax fits (least squares at
// Chebyshev nodes against 40-digit mpmath values, then rounded to the evaluating type).
//
// Accuracy (tests/kernels/test_kernel_fused_math.py and test_kernel_fused_accuracy.py
// measure it): double erf within 1 ulp (0.95 ulp against mpmath); exp within 1 ulp where
// the result is normal (subnormal results kept, within 1 unit of 2^-1074); log within
// 1 ulp. Float: expf within 1 ulp; logf within 1 ulp; Phi(x) and phi(x) (the GELU's erf
// form) within a few ulps, the bounds the accuracy test states.
#pragma once

#include "accum_math.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MTA_FI MTA_HD __forceinline__
#else
#define MTA_FI inline __attribute__((always_inline))
#endif

// Partial sums of a row: lane l adds elements l, l + 32, l + 64, ... in order,
// then lane l + w is added into lane l for w = 16, 8, 4, 2, 1. A GPU block gives a
// row 32 threads; the CPU loop keeps 32 partial sums (2 AVX-512 registers of floats,
// 4 of doubles).
#define MTA_ROW_LANES 32
// LayerNorm's weight and bias gradients: a partial column sum per 64 rows, in
// row order, then the partials in chunk order (the same on every path).
#define MTA_COLUMN_CHUNK 64

// ------------------------------------------------------------ conversions, comparisons

#if defined(__CUDA_ARCH__)
// cvt without .ftz: CuPy's -ftz=true would otherwise flush a subnormal result.
__device__ inline float mta_to_float(double x) {
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}
// setp without .ftz: under -ftz=true a float compare would see a subnormal as 0.
#define MTA_PTX_COMPARE(name, op)                                                              \
    __device__ inline bool name(float a, float b) {                                            \
        unsigned r;                                                                            \
        asm("{ .reg .pred p; setp." op ".f32 p, %1, %2; selp.u32 %0, 1, 0, p; }"              \
            : "=r"(r) : "f"(a), "f"(b));                                                       \
        return r != 0;                                                                         \
    }
MTA_PTX_COMPARE(mta_less, "lt")
MTA_PTX_COMPARE(mta_greater, "gt")
MTA_PTX_COMPARE(mta_greater_equal, "ge")
#undef MTA_PTX_COMPARE
#else
inline float mta_to_float(double x) { return (float)x; }
inline bool mta_less(float a, float b) { return a < b; }
inline bool mta_greater(float a, float b) { return a > b; }
inline bool mta_greater_equal(float a, float b) { return a >= b; }
#endif
MTA_HD inline bool mta_less(double a, double b) { return a < b; }
MTA_HD inline bool mta_greater(double a, double b) { return a > b; }
MTA_HD inline bool mta_greater_equal(double a, double b) { return a >= b; }

// A float64 row statistic (LayerNorm's mean and rstd, cross entropy's log-sum-exp are
// stored as float64 whatever the dtype) read back in the arithmetic type T: exact for a
// value a float32 kernel wrote.
template <class T> struct MtaNarrow;
template <> struct MtaNarrow<float> {
    MTA_FI static float from(double x) { return mta_to_float(x); }
};
template <> struct MtaNarrow<double> {
    MTA_FI static double from(double x) { return x; }
};

// ------------------------------------------------------------ helpers

// c[0] + v (c[1] + v (c[2] + ...)), highest coefficient first, one rounding per step (the
// double one a multiply and an add, the float one below a fused multiply-add).
MTA_FI double mta_horner(double, double c) { return c; }
template <class... C>
MTA_FI double mta_horner(double v, double c, C... rest) {
    return mta_add(mta_mul(mta_horner(v, rest...), v), c);
}
// a b + c rounded once (the same on every path: the device's fma.rn, the host's fused
// multiply-add, which the float loops' AVX2 and AVX-512 clones issue as one instruction)
#if defined(__CUDA_ARCH__)
// fma without .ftz: CuPy's -ftz=true would otherwise flush a subnormal operand or result
__device__ inline float mta_fmaf(float a, float b, float c) {
    float r;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
    return r;
}
#else
inline float mta_fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
#endif

// The float polynomials fuse each step (one rounding, and half the instructions of the loops
// that are compute-bound: GELU (erf) forward and backward 16-17% faster on 1024 x 256).
MTA_FI float mta_hornerf(float, float c) { return c; }
template <class... C>
MTA_FI float mta_hornerf(float v, float c, C... rest) {
    return mta_fmaf(mta_hornerf(v, rest...), v, c);
}

MTA_FI double mta_abs(double x) { return mta_double_from_bits(mta_double_bits(x) & 0x7fffffffffffffffull); }
MTA_FI float mta_abs(float x) { return mta_float_from_bits(mta_float_bits(x) & 0x7fffffffu); }
MTA_FI double mta_with_sign_of(double magnitude, double sign) {
    return mta_double_from_bits(mta_double_bits(magnitude) | (mta_double_bits(sign) & 0x8000000000000000ull));
}
MTA_FI bool mta_is_nan(double x) { return (mta_double_bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
MTA_FI bool mta_is_nan(float x) { return (mta_float_bits(x) & 0x7fffffffu) > 0x7f800000u; }
// 2^k for -1022 <= k <= 1023 (double) or -126 <= k <= 127 (float), from its bits.
MTA_FI double mta_pow2(mta_i64 k) { return mta_double_from_bits((mta_u64)(k + 1023) << 52); }
MTA_FI float mta_pow2f(int k) { return mta_float_from_bits((mta_u32)(k + 127) << 23); }
// -inf in T, from its bits.
template <class T> MTA_FI T mta_minus_infinity();
template <> MTA_FI double mta_minus_infinity<double>() { return mta_double_from_bits(0xfff0000000000000ull); }
template <> MTA_FI float mta_minus_infinity<float>() { return mta_float_from_bits(0xff800000u); }
// min(max(x, -limit), limit); NaN stays NaN.
template <class T>
MTA_FI T mta_clamp_magnitude(T x, T limit) {
    const T upper = mta_select(mta_greater(x, limit), limit, x);
    return mta_select(mta_less(upper, -limit), -limit, upper);
}

// ------------------------------------------------------------ coefficient sets

// float64: the double functions' polynomials.
struct MtaFusedPoly {
    // (erf(a)/a - 1) as a polynomial in a^2 - 0.5, for 0 <= a < 1
    MTA_FI static double erf_small(double v) {
        return mta_horner(v, -0.03453126133013269, -0.2810721780454342, 0.07940998675593483, -0.018283884489152538,
                          0.0034802744966656173, -0.0005611894221277441, 7.829649525455377e-05,
                          -9.614808525709598e-06, 1.0536449530013862e-06, -1.0420476859445043e-07,
                          9.38762931097412e-09, -7.764167415589177e-10, 5.958930343261137e-11,
                          -4.230945824295338e-12);
    }
    // log(erfc(a) / t) + a^2 with t = 2 / (2 + a), as a polynomial in t - 11/24, for 1 <= a <= 6
    MTA_FI static double erfc_exponent(double v) {
        return mta_horner(v, -0.7274922853522042, 1.327601228934298, 0.23442498156110278, -0.3441290896194704,
                          -0.21311761637261442, 0.24359275586583976, 0.19619415923712247, -0.2657747698285945,
                          -0.16963712658886962, 0.3468585916222164, 0.09429941505793459, -0.4551979790631505,
                          0.07621143792160973, 0.52256130456081, -0.3547259136137361, -0.4126653050574088,
                          0.5535888611630921);
    }
    // (exp(r) - 1 - r) / r^2 for |r| <= log(2) / 2
    MTA_FI static double exp_tail(double r) {
        return mta_horner(r, 0.5, 0.1666666666666667, 0.04166666666666667, 0.008333333333326141,
                          0.0013888888888883752, 0.00019841269874800493, 2.4801587325533363e-05,
                          2.7557255425746435e-06, 2.7557273661348637e-07, 2.510520637395701e-08,
                          2.0914679376583935e-09);
    }
    // (2 atanh(u) - 2 u) / u^3 as a polynomial in u^2 - c, for u^2 <= (3 - 2 sqrt 2)^2
    MTA_FI static double log_tail(double v) {
        return mta_horner(v, 0.6726167307481199, 0.4085574242422547, 0.29576803635075294, 0.2332686668383402,
                          0.193586961400031, 0.1661756523517976, 0.14611944817451095, 0.13081899327100993,
                          0.1188254468445996, 0.10909557969785763);
    }
};

// float32: the float functions' polynomials, float literals evaluated in float.
struct MtaFusedPolyf {
    // (exp(r) - 1 - r) / r^2 for |r| <= log(2) / 2
    MTA_FI static float exp_tail(float r) {
        return mta_hornerf(r, 0.5f, 0.16666577756404877f, 0.041666556149721146f, 0.008363173343241215f,
                           0.0013926175888627768f);
    }
    // (2 atanh(u) - 2 u) / u^3 as a polynomial in u^2 - c, for u^2 <= (3 - 2 sqrt 2)^2
    MTA_FI static float log_tail(float v) {
        return mta_hornerf(v, 0.6726167f, 0.40859532f, 0.29579464f);
    }
    // Phi(-z) / (phi(z) t), t = 3 / (3 + z) (Mills' ratio over t), as a polynomial in t - 0.5857,
    // for 0 <= z <= 14.5
    MTA_FI static float normal_tail(float v) {
        return mta_hornerf(v, 0.6879597f, 0.98946255f, 0.8426959f, 0.25518286f, -0.21130294f, -0.14358068f,
                           0.10495936f, 0.06538083f, -0.060629837f, -0.021887116f);
    }
};

// ------------------------------------------------------------ exp, log, erf (double)

// e^y: y = k log 2 + r (Cody-Waite: log 2 in two parts, k log2_hi exact), e^r by
// its polynomial, then two exact power-of-two scalings so that subnormal and
// overflowing results round once. y is clamped to [-746, 710] first (e^y is
// then 0 or inf anyway); NaN stays NaN. k comes from the bits of the rounding
// sum, never from a float-to-int conversion (undefined for NaN).
MTA_FI double mta_exp(double y) {
    const double magic = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
    y = mta_select(y < -746.0, -746.0, y);
    y = mta_select(y > 710.0, 710.0, y);
    const double m = mta_add(mta_mul(y, 1.4426950408889634), magic);
    const double kd = mta_sub(m, magic);
    const mta_i64 k = (mta_i64)(mta_double_bits(m) - mta_double_bits(magic));
    const double r = mta_sub(mta_sub(y, mta_mul(kd, 0.6931471803691238)), mta_mul(kd, 1.9082149292705877e-10));
    const double p = mta_add(1.0, mta_add(r, mta_mul(mta_mul(r, r), MtaFusedPoly::exp_tail(r))));
    const mta_i64 k1 = k >> 1;
    // e^-746 rounds to 0: given as 0, so that a masked (-inf) term costs no underflow (a slow
    // microcode assist on x86) in the scalings
    return mta_mul(mta_mul(mta_select(y == -746.0, 0.0, p), mta_pow2(k1)), mta_pow2(k - k1));
}

// log s for s = 0 or s >= 1 (the sum of a softmax row): s = 2^e f with f in [sqrt(1/2), sqrt 2),
// log f = x - u (x - u^2 L(u^2)) with x = f - 1 (exact) and u = x / (f + 1).
// +inf gives +inf, NaN gives NaN, 0 gives -inf.
MTA_FI double mta_log_sum(double s) {
    const mta_u64 bits = mta_double_bits(s);
    const double mantissa = mta_double_from_bits((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    const bool high = mantissa > 1.4142135623730951;
    const double f = mta_select(high, mta_mul(mantissa, 0.5), mantissa);
    const double e = (double)((mta_i64)(bits >> 52) - 1023 + (high ? 1 : 0));
    const double x = mta_sub(f, 1.0);
    const double u = mta_div(x, mta_add(f, 1.0));
    const double u2 = mta_mul(u, u);
    const double tail = mta_mul(u2, MtaFusedPoly::log_tail(mta_sub(u2, 0.014718625761429707)));
    const double log_f = mta_sub(x, mta_mul(u, mta_sub(x, tail)));
    const double result = mta_add(mta_mul(e, 0.6931471803691238), mta_add(log_f, mta_mul(e, 1.9082149292705877e-10)));
    const double passed = mta_select(mta_is_nan(s) || s > 1.79769313486231570e308, s, result);  // inf, NaN
    return mta_select(s == 0.0, mta_minus_infinity<double>(), passed);  // an all -inf row
}

// erf(x): for |x| < 1, x + x Q(x^2); above, 1 - t e^(G(t) - x^2) with t = 2 / (2 + |x|);
// from 6 on, 1. The sign is x's; NaN gives NaN.
MTA_FI double mta_erf(double x) {
    const double a = mta_abs(x);
    const double small = mta_add(a, mta_mul(a, MtaFusedPoly::erf_small(mta_sub(mta_mul(a, a), 0.5))));
    const double top = 6.0;
    const double z = mta_select(a > top, top, a);
    const double t = mta_div(2.0, mta_add(2.0, z));
    const double g = MtaFusedPoly::erfc_exponent(mta_sub(t, 0.4583333333333333));
    const double large = mta_sub(1.0, mta_mul(t, mta_exp(mta_sub(g, mta_mul(z, z)))));
    double r = mta_select(a < 1.0, small, large);
    r = mta_select(a >= top, 1.0, r);
    r = mta_select(mta_is_nan(x), x, r);
    return mta_with_sign_of(r, x);
}

// ------------------------------------------------------------ exp, log, Phi (float)

// e^(y + lo) in float arithmetic, lo a small correction to y (the low part of a product
// kept in two floats; 0 for a plain e^y): the steps of mta_exp with float32's constants,
// lo added to the reduced argument, y clamped to [-104, 89] (e^y is 0 or inf beyond;
// mta_expf_sum clamps, mta_expf_clamped takes a y in range). Within 1 ulp of float32 (10% of
// values not correctly rounded).
// mta_expf_sum of a y already in [-104, 89].
MTA_FI float mta_expf_clamped(float y, float lo) {
    const float magic = 12582912.0f;  // 1.5 * 2^23
    const float m = mta_add(mta_mul(y, 1.44269504f), magic);
    const float kd = mta_sub(m, magic);
    const int k = (int)(mta_float_bits(m) - mta_float_bits(magic));
    const float r = mta_add(mta_sub(mta_sub(y, mta_mul(kd, 0.693145751953125f)), mta_mul(kd, 1.42860677e-06f)), lo);
    const float p = mta_add(1.0f, mta_add(r, mta_mul(mta_mul(r, r), MtaFusedPolyf::exp_tail(r))));
    const int k1 = k >> 1;
    // at the clamp (e^-104 is about half the least subnormal) the result is 0, as in mta_exp
    return mta_mul(mta_mul(mta_select(mta_float_bits(y) == 0xc2d00000u, 0.0f, p), mta_pow2f(k1)), mta_pow2f(k - k1));
}

MTA_FI float mta_expf_sum(float y, float lo) {
    y = mta_select(mta_less(y, -104.0f), -104.0f, y);
    return mta_expf_clamped(mta_select(mta_greater(y, 89.0f), 89.0f, y), lo);
}

MTA_FI float mta_expf(float y) { return mta_expf_sum(y, 0.0f); }

// log s in float for s = 0 or s >= 1, the steps of mta_log_sum (within 1 ulp).
MTA_FI float mta_log_sum(float s) {
    const mta_u32 bits = mta_float_bits(s);
    const float mantissa = mta_float_from_bits((bits & 0x007fffffu) | 0x3f800000u);
    const bool high = mta_greater(mantissa, 1.41421354f);
    const float f = mta_select(high, mta_mul(mantissa, 0.5f), mantissa);
    const float e = (float)((int)(bits >> 23) - 127 + (high ? 1 : 0));
    const float x = mta_sub(f, 1.0f);
    const float u = mta_div(x, mta_add(f, 1.0f));
    const float u2 = mta_mul(u, u);
    const float tail = mta_mul(u2, MtaFusedPolyf::log_tail(mta_sub(u2, 0.0147186257f)));
    const float log_f = mta_sub(x, mta_mul(u, mta_sub(x, tail)));
    const float result = mta_add(mta_mul(e, 0.693145751953125f), mta_add(log_f, mta_mul(e, 1.42860677e-06f)));
    const float passed = mta_select(mta_is_nan(s) || mta_greater(s, 3.40282347e38f), s, result);  // inf, NaN
    return mta_select(mta_float_bits(s) == 0u, mta_minus_infinity<float>(), passed);  // an all -inf row
}

// The parts of the standard normal's CDF Phi(x) and density phi(x) at a float x, in float
// arithmetic. phi(x) = e^(-x^2 / 2) / sqrt(2 pi), the square kept in two floats (x's top 12
// significand bits squared are exact), so the tail's density is as accurate as e^ itself;
// Phi(-z) = phi(z) R with R = t M(t) (Mills' ratio, t = 3 / (3 + z), z = |x|, one polynomial
// from 0 to 14.5), and Phi(x) = 1 - Phi(-z) for positive x (Phi(-z) <= 1/2: no cancellation
// on either side). |x| is clamped to 14.5 (phi is 0 in float from 14.43 on). NaN gives NaN.
struct MtaNormalf {
    float pdf;    // phi(x)
    float mills;  // R: Phi(-z) = phi(z) R
    float x;      // x clamped to [-14.5, 14.5]
    bool lower;   // x < 0
};

MTA_FI MtaNormalf mta_normalf(float x) {
    MtaNormalf n;
    n.x = mta_clamp_magnitude(x, 14.5f);
    const float z = mta_abs(n.x);
    // -z^2 / 2 = hi + lo: hi = -z_hi^2 / 2 exact, lo = -z_lo (z_hi + z_lo / 2)
    const float z_hi = mta_float_from_bits(mta_float_bits(z) & 0xfffff000u);
    const float z_lo = mta_sub(z, z_hi);
    const float half_square_hi = mta_mul(mta_mul(z_hi, -0.5f), z_hi);
    const float half_square_lo = mta_mul(mta_mul(z_lo, -1.0f), mta_add(z_hi, mta_mul(z_lo, 0.5f)));
    // hi >= -105.125 (z <= 14.5), so only the lower clamp applies
    n.pdf = mta_mul(mta_expf_clamped(mta_select(mta_less(half_square_hi, -104.0f), -104.0f, half_square_hi),
                                     half_square_lo), 0.398942292f);
    const float t = mta_div(3.0f, mta_add(3.0f, z));
    n.mills = mta_mul(t, MtaFusedPolyf::normal_tail(mta_sub(t, 0.5857f)));
    n.lower = mta_less(x, 0.0f);
    return n;
}

// gelu(x) = x Phi(x) from the parts; below 0 (x phi(x)) R, so that no factor is subnormal
// before the result is.
MTA_FI float mta_gelu_normalf(const MtaNormalf& n, float x) {
    const float upper = mta_mul(x, mta_sub(1.0f, mta_mul(n.pdf, n.mills)));
    const float lower = mta_mul(mta_mul(x, n.pdf), n.mills);
    return mta_select(n.lower, lower, upper);
}

// gelu'(x) = Phi(x) + x phi(x) from the parts; below 0, phi(z) (R - z).
MTA_FI float mta_gelu_derivative_normalf(const MtaNormalf& n) {
    const float upper = mta_add(mta_sub(1.0f, mta_mul(n.pdf, n.mills)), mta_mul(n.x, n.pdf));
    const float lower = mta_mul(n.pdf, mta_add(n.mills, n.x));
    return mta_select(n.lower, lower, upper);
}

// ------------------------------------------------------------ GELU

// PyTorch's two GELUs:
//   erf:  y = x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2));  y' = Phi(x) + x phi(x)
//   tanh: y = 0.5 x (1 + tanh(u)) = x sigma(2u), u = sqrt(2/pi) (x + 0.044715 x^3);
//         y' = sigma(2u) + 2 x sigma(2u) (1 - sigma(2u)) u'. sigma(2u) and 1 - sigma(2u) are
//         1 / (1 + E) and E / (1 + E) (which is which follows the sign of u), E = e^-2|u|,
//         so neither overflows nor cancels.
// float64 inputs: Phi through the double erf; float32 inputs: Phi and phi by mta_normalf.
template <class T>
struct MtaGeluTanhParts {
    T s;       // sigma(2u)
    T s_s1;    // sigma(2u) (1 - sigma(2u))
    T x;       // x clamped to +-30 (double) or +-12 (float): e^-2|u| is 0 from there on
};

MTA_FI double mta_tanh_exp(double y) { return mta_exp(y); }
MTA_FI float mta_tanh_exp(float y) { return mta_expf(y); }
MTA_FI double mta_tanh_clamp(double) { return 30.0; }
MTA_FI float mta_tanh_clamp(float) { return 12.0f; }

template <class T>
MTA_FI MtaGeluTanhParts<T> mta_gelu_tanh_parts(T x) {
    MtaGeluTanhParts<T> parts;
    parts.x = mta_clamp_magnitude(x, mta_tanh_clamp(x));
    const T cube = mta_mul(mta_mul(parts.x, parts.x), parts.x);
    const T u = mta_mul(T(0.7978845608028654), mta_add(parts.x, mta_mul(T(0.044715), cube)));
    const T e = mta_tanh_exp(mta_mul(T(-2), mta_abs(u)));
    const T q = mta_div(T(1), mta_add(T(1), e));
    const T p = mta_mul(e, q);
    parts.s = mta_select(mta_greater_equal(u, T(0)), q, p);
    parts.s_s1 = mta_mul(p, q);
    return parts;
}

template <class T>
MTA_FI T mta_gelu_tanh_derivative(const MtaGeluTanhParts<T>& parts) {
    const T x = parts.x;
    const T du = mta_mul(T(0.7978845608028654), mta_add(T(1), mta_mul(T(0.134145), mta_mul(x, x))));
    return mta_add(parts.s, mta_mul(mta_mul(mta_mul(T(2), x), parts.s_s1), du));
}

MTA_FI double mta_gelu_cdf(double x) { return mta_mul(0.5, mta_add(1.0, mta_erf(mta_mul(x, 0.7071067811865476)))); }

// gelu_forward: y = gelu(x) (8 B/elem fp32: x read, y written)
template <class T, bool TANH>
MTA_FI T mta_gelu_forward_element(T x);

template <class T, bool TANH>
MTA_FI T mta_gelu_backward_element(T x, T dy);

template <>
MTA_FI double mta_gelu_forward_element<double, false>(double x) { return mta_mul(x, mta_gelu_cdf(x)); }
template <>
MTA_FI float mta_gelu_forward_element<float, false>(float x) { return mta_gelu_normalf(mta_normalf(x), x); }
template <>
MTA_FI double mta_gelu_forward_element<double, true>(double x) { return mta_mul(x, mta_gelu_tanh_parts(x).s); }
template <>
MTA_FI float mta_gelu_forward_element<float, true>(float x) { return mta_mul(x, mta_gelu_tanh_parts(x).s); }

// gelu_backward: dx = dy * gelu'(x) (12 B/elem fp32: x and dy read, dx written). The
// derivative's x phi(x) term takes x clamped (phi is 0 there), so +-inf give 1 and 0.
template <>
MTA_FI double mta_gelu_backward_element<double, false>(double x, double dy) {
    const double xc = mta_clamp_magnitude(x, 40.0);
    const double pdf = mta_mul(0.3989422804014327, mta_exp(mta_mul(mta_mul(-0.5, xc), xc)));
    return mta_mul(dy, mta_add(mta_gelu_cdf(x), mta_mul(xc, pdf)));
}
template <>
MTA_FI float mta_gelu_backward_element<float, false>(float x, float dy) {
    return mta_mul(dy, mta_gelu_derivative_normalf(mta_normalf(x)));
}
template <>
MTA_FI double mta_gelu_backward_element<double, true>(double x, double dy) {
    return mta_mul(dy, mta_gelu_tanh_derivative(mta_gelu_tanh_parts(x)));
}
template <>
MTA_FI float mta_gelu_backward_element<float, true>(float x, float dy) {
    return mta_mul(dy, mta_gelu_tanh_derivative(mta_gelu_tanh_parts(x)));
}

// ------------------------------------------------------------ LayerNorm (in the stored type T)

// layer_norm_forward, one element: y = ((x - mean) rstd) w + b. A missing weight is 1 and a
// missing bias -0 (x + -0 is x for every x), so both forms share one expression.
template <class T>
MTA_FI T mta_layer_norm_element(T x, T mean, T rstd, T w, T b) {
    return mta_add(mta_mul(mta_mul(mta_sub(x, mean), rstd), w), b);
}

// layer_norm_backward, one element of dx: rstd ((g w - mean(g w)) - x_hat mean(g w x_hat))
template <class T>
MTA_FI T mta_layer_norm_grad_element(T gw, T x_hat, T rstd, T mean_gw, T mean_gw_x_hat) {
    return mta_mul(rstd, mta_sub(mta_sub(gw, mean_gw), mta_mul(x_hat, mean_gw_x_hat)));
}

// ------------------------------------------------------------ softmax cross entropy (in T)

// The shift of a row's exponentials: its largest value, or 0 when that is not finite
// (an all -inf row, an inf in the row), as kernels/fused_reference.py shifts it.
template <class T>
MTA_FI T mta_softmax_shift(T row_max) {
    return mta_select(mta_is_finite(row_max), row_max, T(0));
}

// The larger of a running maximum and a value; NaN values are skipped (a NaN in the row
// makes its sum, and so its loss, NaN anyway).
template <class T>
MTA_FI T mta_running_max(T m, T v) {
    return mta_select(mta_greater(v, m), v, m);
}

MTA_FI double mta_softmax_exp(double d) { return mta_exp(d); }
MTA_FI float mta_softmax_exp(float d) { return mta_expf(d); }

// cross_entropy_backward, one element: w (softmax(x) - [class is the target]), w the item's
// gradient (0 for an ignored item), softmax(x) = e^(x - lse).
template <class T>
MTA_FI T mta_cross_entropy_grad_element(T x, T lse, T w, bool target) {
    const T d = mta_mul(w, mta_softmax_exp(mta_sub(x, lse)));
    return mta_select(target, mta_sub(d, w), d);
}

// ------------------------------------------------------------ softmax rows (in T)

// A softmax row's score: x scale + b, b the row's additive bias (an attention mask; -0 when
// there is none, x scale + -0 being x scale for every x).
template <class T>
MTA_FI T mta_softmax_score(T x, T scale, T b) {
    return mta_add(mta_mul(x, scale), b);
}

// softmax_backward, one element: (p (g - sum(g p))) scale, scale the forward's (the scores'
// gradient, the input's being scale times it).
template <class T>
MTA_FI T mta_softmax_grad_element(T p, T g, T dot, T scale) {
    return mta_mul(mta_mul(p, mta_sub(g, dot)), scale);
}

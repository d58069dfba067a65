// Element math of the fused layer kernels (GELU, LayerNorm, softmax cross
// entropy), written once for NVRTC, the native CPU loops and the emulator.
//
// Every value is computed in double, whatever the stored dtype, and rounded
// once to it at the end. The transcendental functions are our own (exp, log,
// erf): polynomials evaluated one IEEE operation at a time, branch-free, so
// the host compiler vectorizes them, every compiler rounds them alike, and
// kernels/fused_reference.py repeats them operation for operation in NumPy
// (bit for bit). The coefficients are near-minimax fits (Chebyshev
// interpolants computed in 60-digit arithmetic). P, the precision a result is
// rounded to (float or double), picks the coefficient set: the float set is
// shorter and still accurate far below float32 rounding.
//
// Accuracy (tests/kernels/test_kernel_fused_math.py measures it): erf within
// 1 ulp in double (0.95 ulp against mpmath) and within 1 ulp in float32 (one
// value in 550,000 not correctly rounded); exp within 1 ulp where the result
// is normal (subnormal results are kept, within 1 unit of 2^-1074); log within
// 1 ulp; the float exp of float32 softmax terms within 1 ulp of float32.
#pragma once

#include "accum_math.cuh"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MTA_FI MTA_HD __forceinline__
#else
#define MTA_FI inline __attribute__((always_inline))
#endif

// Partial sums of a row: lane l adds elements l, l + 32, l + 64, ... in order,
// then lane l + w is added into lane l for w = 16, 8, 4, 2, 1. A GPU block gives a
// row 32 threads; the CPU loop keeps 32 partial sums (4 AVX-512 registers).
#define MTA_ROW_LANES 32
// LayerNorm's weight and bias gradients: a partial column sum per 64 rows, in
// row order, then the partials in chunk order (the same on every path).
#define MTA_COLUMN_CHUNK 64

// ------------------------------------------------------------ conversions

#if defined(__CUDA_ARCH__)
// cvt without .ftz: CuPy's -ftz=true would otherwise flush a subnormal result.
__device__ inline float mta_to_float(double x) {
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
    return r;
}
#else
inline float mta_to_float(double x) { return (float)x; }
#endif

template <class T> struct MtaNarrow;
template <> struct MtaNarrow<float> {
    MTA_FI static float from(double x) { return mta_to_float(x); }
};
template <> struct MtaNarrow<double> {
    MTA_FI static double from(double x) { return x; }
};

// ------------------------------------------------------------ helpers

// c[0] + v (c[1] + v (c[2] + ...)), highest coefficient first, one rounding per step.
MTA_FI double mta_horner(double, double c) { return c; }
template <class... C>
MTA_FI double mta_horner(double v, double c, C... rest) {
    return mta_add(mta_mul(mta_horner(v, rest...), v), c);
}

MTA_FI double mta_abs(double x) { return mta_double_from_bits(mta_double_bits(x) & 0x7fffffffffffffffull); }
MTA_FI double mta_with_sign_of(double magnitude, double sign) {
    return mta_double_from_bits(mta_double_bits(magnitude) | (mta_double_bits(sign) & 0x8000000000000000ull));
}
MTA_FI bool mta_is_nan(double x) { return (mta_double_bits(x) & 0x7fffffffffffffffull) > 0x7ff0000000000000ull; }
// 2^k for -1022 <= k <= 1023, from its bits.
MTA_FI double mta_pow2(mta_i64 k) { return mta_double_from_bits((mta_u64)(k + 1023) << 52); }

// ------------------------------------------------------------ coefficient sets

template <class P> struct MtaFusedPoly;

template <> struct MtaFusedPoly<double> {
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
    MTA_FI static double erfc_center() { return 0.4583333333333333; }
    // erf(a) rounds to 1 from here on
    MTA_FI static double erf_saturation() { return 6.0; }
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

template <> struct MtaFusedPoly<float> {
    MTA_FI static double erf_small(double v) {
        return mta_horner(v, -0.03453126133013269, -0.28107217803106377, 0.07940998675464103, -0.01828388525546938,
                          0.0034802745656599843, -0.0005611783913285922, 7.829550205426472e-05,
                          -9.67358776544459e-06, 1.058938064107502e-06);
    }
    // for 1 <= a <= 4, in t - 1/2
    MTA_FI static double erfc_exponent(double v) {
        return mta_horner(v, -0.6717940840566923, 1.3452864478954178, 0.18937322741322238, -0.37516483867853173,
                          -0.15796306277878971, 0.2823893067124271, 0.1125784255348416, -0.29954192687973125,
                          -0.03799566328519206, 0.31861925757525267, -0.07539979820771632);
    }
    MTA_FI static double erfc_center() { return 0.5; }
    MTA_FI static double erf_saturation() { return 4.0; }
    MTA_FI static double exp_tail(double r) {
        return mta_horner(r, 0.4999999999995511, 0.16666666666662586, 0.04166666678626573, 0.00833333334420298,
                          0.0013888839110572009, 0.00019841224599656011, 2.4867870179687727e-05,
                          2.7617564785876086e-06);
    }
    MTA_FI static double log_tail(double v) {
        return mta_horner(v, 0.6726167307481663, 0.4085574242422963, 0.2957680324923276, 0.23326866338391572,
                          0.1936344533360521, 0.16621817152858928);
    }
};

// ------------------------------------------------------------ exp, log, erf

// e^y: y = k log 2 + r (Cody-Waite: log 2 in two parts, k log2_hi exact), e^r by
// its polynomial, then two exact power-of-two scalings so that subnormal and
// overflowing results round once. y is clamped to [-746, 710] first (e^y is
// then 0 or inf anyway); NaN stays NaN. k comes from the bits of the rounding
// sum, never from a float-to-int conversion (undefined for NaN).
template <class P>
MTA_FI double mta_exp(double y) {
    const double magic = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
    y = mta_select(y < -746.0, -746.0, y);
    y = mta_select(y > 710.0, 710.0, y);
    const double m = mta_add(mta_mul(y, 1.4426950408889634), magic);
    const double kd = mta_sub(m, magic);
    const mta_i64 k = (mta_i64)(mta_double_bits(m) - mta_double_bits(magic));
    const double r = mta_sub(mta_sub(y, mta_mul(kd, 0.6931471803691238)), mta_mul(kd, 1.9082149292705877e-10));
    const double p = mta_add(1.0, mta_add(r, mta_mul(mta_mul(r, r), MtaFusedPoly<P>::exp_tail(r))));
    const mta_i64 k1 = k >> 1;
    return mta_mul(mta_mul(p, mta_pow2(k1)), mta_pow2(k - k1));
}

// log s for s = 0 or s >= 1 (the sum of a softmax row): s = 2^e f with f in [sqrt(1/2), sqrt 2),
// log f = x - u (x - u^2 L(u^2)) with x = f - 1 (exact) and u = x / (f + 1).
// +inf gives +inf, NaN gives NaN, 0 gives -inf.
template <class P>
MTA_FI double mta_log_sum(double s) {
    const mta_u64 bits = mta_double_bits(s);
    const double mantissa = mta_double_from_bits((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
    const bool high = mantissa > 1.4142135623730951;
    const double f = mta_select(high, mta_mul(mantissa, 0.5), mantissa);
    const double e = (double)((mta_i64)(bits >> 52) - 1023 + (high ? 1 : 0));
    const double x = mta_sub(f, 1.0);
    const double u = mta_div(x, mta_add(f, 1.0));
    const double u2 = mta_mul(u, u);
    const double tail = mta_mul(u2, MtaFusedPoly<P>::log_tail(mta_sub(u2, 0.014718625761429707)));
    const double log_f = mta_sub(x, mta_mul(u, mta_sub(x, tail)));
    const double result = mta_add(mta_mul(e, 0.6931471803691238), mta_add(log_f, mta_mul(e, 1.9082149292705877e-10)));
    const double passed = mta_select(mta_is_nan(s) || s > 1.79769313486231570e308, s, result);  // inf, NaN
    return mta_select(s == 0.0, mta_double_from_bits(0xfff0000000000000ull), passed);  // an all -inf row
}

// erf(x): for |x| < 1, x + x Q(x^2); above, 1 - t e^(G(t) - x^2) with t = 2 / (2 + |x|);
// from the saturation point on, 1. The sign is x's; NaN gives NaN.
template <class P>
MTA_FI double mta_erf(double x) {
    const double a = mta_abs(x);
    const double small = mta_add(a, mta_mul(a, MtaFusedPoly<P>::erf_small(mta_sub(mta_mul(a, a), 0.5))));
    const double top = MtaFusedPoly<P>::erf_saturation();
    const double z = mta_select(a > top, top, a);
    const double t = mta_div(2.0, mta_add(2.0, z));
    const double g = MtaFusedPoly<P>::erfc_exponent(mta_sub(t, MtaFusedPoly<P>::erfc_center()));
    const double large = mta_sub(1.0, mta_mul(t, mta_exp<P>(mta_sub(g, mta_mul(z, z)))));
    double r = mta_select(a < 1.0, small, large);
    r = mta_select(a >= top, 1.0, r);
    r = mta_select(mta_is_nan(x), x, r);
    return mta_with_sign_of(r, x);
}

// e^y in float arithmetic, for the softmax terms of float32 logits (fewer operations than the
// double exp; within 1 ulp of float32, 10% of values not correctly rounded): the same steps
// as mta_exp with float32's constants, y clamped to [-104, 89]. Comparisons go through
// double, since the device would compare floats with flush-to-zero.
MTA_FI float mta_hornerf(float, float c) { return c; }
template <class... C>
MTA_FI float mta_hornerf(float v, float c, C... rest) {
    return mta_add(mta_mul(mta_hornerf(v, rest...), v), c);
}

MTA_FI float mta_pow2f(int k) { return mta_float_from_bits((mta_u32)(k + 127) << 23); }

MTA_FI float mta_expf(float y) {
    const float magic = 12582912.0f;  // 1.5 * 2^23
    const double wide = mta_to_double(y);
    y = mta_select(wide < -104.0, -104.0f, y);
    y = mta_select(wide > 89.0, 89.0f, y);
    const float m = mta_add(mta_mul(y, 1.44269504f), magic);
    const float kd = mta_sub(m, magic);
    const int k = (int)(mta_float_bits(m) - mta_float_bits(magic));
    const float r = mta_sub(mta_sub(y, mta_mul(kd, 0.693145751953125f)), mta_mul(kd, 1.42860677e-06f));
    const float q = mta_hornerf(r, 0.5f, 0.16666577756404877f, 0.041666556149721146f, 0.008363173343241215f,
                                0.0013926175888627768f);
    const float p = mta_add(1.0f, mta_add(r, mta_mul(mta_mul(r, r), q)));
    const int k1 = k >> 1;
    return mta_mul(mta_mul(p, mta_pow2f(k1)), mta_pow2f(k - k1));
}

// e^d for a softmax term (d = x - shift or x - lse, in double): the double exp for float64
// logits, the float exp of d rounded to float for float32 logits.
template <class T> struct MtaSoftmaxExp;
template <> struct MtaSoftmaxExp<double> {
    MTA_FI static double of(double d) { return mta_exp<double>(d); }
};
template <> struct MtaSoftmaxExp<float> {
    MTA_FI static double of(double d) { return mta_to_double(mta_expf(mta_to_float(d))); }
};

// ------------------------------------------------------------ GELU

// PyTorch's two GELUs, in double:
//   erf:  y = x Phi(x), Phi(x) = 0.5 (1 + erf(x / sqrt 2));  y' = Phi(x) + x phi(x)
//   tanh: y = 0.5 x (1 + tanh(u)) = x sigma(2u), u = sqrt(2/pi) (x + 0.044715 x^3);
//         y' = sigma(2u) + 2 x sigma(2u) (1 - sigma(2u)) u'. sigma(2u) and 1 - sigma(2u) are
//         1 / (1 + E) and E / (1 + E) (which is which follows the sign of u), E = e^-2|u|,
//         so neither overflows nor cancels.
struct MtaGeluTanhParts {
    double s;       // sigma(2u)
    double s_s1;    // sigma(2u) (1 - sigma(2u))
    double x_cube;  // x^3
};

template <class P>
MTA_FI MtaGeluTanhParts mta_gelu_tanh_parts(double x) {
    MtaGeluTanhParts parts;
    parts.x_cube = mta_mul(mta_mul(x, x), x);
    const double u = mta_mul(0.7978845608028654, mta_add(x, mta_mul(0.044715, parts.x_cube)));
    const double e = mta_exp<P>(mta_mul(-2.0, mta_abs(u)));
    const double q = mta_div(1.0, mta_add(1.0, e));
    const double p = mta_mul(e, q);
    parts.s = mta_select(u >= 0.0, q, p);
    parts.s_s1 = mta_mul(p, q);
    return parts;
}

template <class P>
MTA_FI double mta_gelu_cdf(double x) {
    return mta_mul(0.5, mta_add(1.0, mta_erf<P>(mta_mul(x, 0.7071067811865476))));
}

// gelu(x) (one value, in double)
template <class P, bool TANH>
MTA_FI double mta_gelu(double x) {
    if constexpr (TANH) {
        return mta_mul(x, mta_gelu_tanh_parts<P>(x).s);
    } else {
        return mta_mul(x, mta_gelu_cdf<P>(x));
    }
}

// d gelu / dx at x (one value, in double)
template <class P, bool TANH>
MTA_FI double mta_gelu_derivative(double x) {
    if constexpr (TANH) {
        const MtaGeluTanhParts parts = mta_gelu_tanh_parts<P>(x);
        const double du = mta_mul(0.7978845608028654, mta_add(1.0, mta_mul(0.134145, mta_mul(x, x))));
        return mta_add(parts.s, mta_mul(mta_mul(mta_mul(2.0, x), parts.s_s1), du));
    } else {
        const double pdf = mta_mul(0.3989422804014327, mta_exp<P>(mta_mul(mta_mul(-0.5, x), x)));
        return mta_add(mta_gelu_cdf<P>(x), mta_mul(x, pdf));
    }
}

// gelu_forward: y = gelu(x) (8 B/elem fp32: x read, y written)
template <class T, bool TANH>
MTA_FI T mta_gelu_forward_element(T x) {
    return MtaNarrow<T>::from(mta_gelu<T, TANH>(mta_widen<double>(x)));
}

// gelu_backward: dx = dy * gelu'(x) (12 B/elem fp32: x and dy read, dx written)
template <class T, bool TANH>
MTA_FI T mta_gelu_backward_element(T x, T dy) {
    return MtaNarrow<T>::from(mta_mul(mta_widen<double>(dy), mta_gelu_derivative<T, TANH>(mta_widen<double>(x))));
}

// ------------------------------------------------------------ LayerNorm

// layer_norm_forward, one element: y = ((x - mean) rstd) w + b. A missing weight is 1 and a
// missing bias -0 (x + -0 is x for every x), so both forms share one expression.
template <class T>
MTA_FI T mta_layer_norm_element(T x, double mean, double rstd, double w, double b) {
    const double x_hat = mta_mul(mta_sub(mta_widen<double>(x), mean), rstd);
    return MtaNarrow<T>::from(mta_add(mta_mul(x_hat, w), b));
}

// layer_norm_backward, one element of dx: rstd ((g w - mean(g w)) - x_hat mean(g w x_hat))
template <class T>
MTA_FI T mta_layer_norm_grad_element(double gw, double x_hat, double rstd, double mean_gw, double mean_gw_x_hat) {
    return MtaNarrow<T>::from(mta_mul(rstd, mta_sub(mta_sub(gw, mean_gw), mta_mul(x_hat, mean_gw_x_hat))));
}

// ------------------------------------------------------------ softmax cross entropy

// The shift of a row's exponentials: its largest value, or 0 when that is not finite
// (an all -inf row, an inf in the row), as kernels/fused_reference.py shifts it.
MTA_FI double mta_softmax_shift(double row_max) {
    const bool finite = (mta_double_bits(row_max) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
    return mta_select(finite, row_max, 0.0);
}

// The larger of a running maximum and a value; NaN values are skipped (a NaN in the row
// makes its sum, and so its loss, NaN anyway).
MTA_FI double mta_running_max(double m, double v) { return mta_select(v > m, v, m); }

// cross_entropy_backward, one element: w (softmax(x) - [class is the target]), w the item's
// gradient (0 for an ignored item), softmax(x) = e^(x - lse).
template <class T>
MTA_FI T mta_cross_entropy_grad_element(T x, double lse, double w, bool target) {
    const double d = mta_mul(w, MtaSoftmaxExp<T>::of(mta_sub(mta_widen<double>(x), lse)));
    return MtaNarrow<T>::from(mta_select(target, mta_sub(d, w), d));
}

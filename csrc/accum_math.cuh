// Element math of every accumulation kernel, written once.
//
// Compiled three ways: by NVRTC/nvcc into the CUDA kernels (.cu files), by the
// host C++ compiler into the native CPU module, and again by the host compiler
// (with csrc/native/cuda_emulation.h) into the launch emulator. Every path must
// round exactly as the NumPy reference does: one IEEE round-to-nearest per
// operation, in the order written here, subnormals kept, no fused multiply-add.
//
// The host gets that from plain operators (built with -ffp-contract=off, never
// -ffast-math). The device cannot rely on its flags: CuPy appends -ftz=true to
// every NVRTC compile, which flushes fp32 subnormals in arithmetic, compares
// and conversions. So on the device each operation is explicit PTX with a
// rounding modifier and no .ftz; such instructions are also never contracted
// into an FMA. Comparisons are done on bits.
//
// No CUDA toolkit header is included: NVRTC from the pip wheel ships none.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MTA_HD __host__ __device__
#define MTA_UNROLL _Pragma("unroll")
#else
#define MTA_HD
#define MTA_UNROLL
#endif

typedef unsigned char mta_u8;
typedef unsigned short mta_u16;
typedef unsigned int mta_u32;
typedef unsigned long long mta_u64;
typedef long long mta_i64;

#if !defined(__CUDACC_RTC__)
static_assert(sizeof(mta_u16) == 2 && sizeof(mta_u32) == 4 && sizeof(mta_u64) == 8,
              "fixed-width typedefs do not match this compiler");
#endif

// Storage-only 16-bit float types. Their bits are converted by hand (no
// cuda_fp16.h); the conversions to fp32 are exact, so every compiler agrees.
struct mta_half { mta_u16 bits; };
struct mta_bfloat16 { mta_u16 bits; };

// ---------------------------------------------------------------- bit casts

MTA_HD inline mta_u32 mta_float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    mta_u32 u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
#endif
}

MTA_HD inline float mta_float_from_bits(mta_u32 u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
#endif
}

MTA_HD inline mta_u64 mta_double_bits(double x) {
#if defined(__CUDA_ARCH__)
    return (mta_u64)__double_as_longlong(x);
#else
    mta_u64 u;
    __builtin_memcpy(&u, &x, sizeof u);
    return u;
#endif
}

MTA_HD inline double mta_double_from_bits(mta_u64 u) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    double x;
    __builtin_memcpy(&x, &u, sizeof x);
    return x;
#endif
}

// ------------------------------------------------------ IEEE arithmetic

#if defined(__CUDA_ARCH__)
#define MTA_PTX_BINARY(name, T, op, reg)                                   \
    __device__ inline T name(T a, T b) {                                   \
        T r;                                                               \
        asm(op " %0, %1, %2;" : "=" reg(r) : reg(a), reg(b));              \
        return r;                                                          \
    }
MTA_PTX_BINARY(mta_add, float, "add.rn.f32", "f")
MTA_PTX_BINARY(mta_sub, float, "sub.rn.f32", "f")
MTA_PTX_BINARY(mta_mul, float, "mul.rn.f32", "f")
MTA_PTX_BINARY(mta_div, float, "div.rn.f32", "f")
MTA_PTX_BINARY(mta_add, double, "add.rn.f64", "d")
MTA_PTX_BINARY(mta_sub, double, "sub.rn.f64", "d")
MTA_PTX_BINARY(mta_mul, double, "mul.rn.f64", "d")
MTA_PTX_BINARY(mta_div, double, "div.rn.f64", "d")
#undef MTA_PTX_BINARY

__device__ inline float mta_sqrt(float x) {
    float r;
    asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}
__device__ inline double mta_sqrt(double x) {
    double r;
    asm("sqrt.rn.f64 %0, %1;" : "=d"(r) : "d"(x));
    return r;
}
// Exact, but cvt would flush an fp32 subnormal under -ftz=true.
__device__ inline double mta_to_double(float x) {
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(x));
    return r;
}
#else
template <class T> inline T mta_add(T a, T b) { return a + b; }
template <class T> inline T mta_sub(T a, T b) { return a - b; }
template <class T> inline T mta_mul(T a, T b) { return a * b; }
template <class T> inline T mta_div(T a, T b) { return a / b; }
inline float mta_sqrt(float x) { return __builtin_sqrtf(x); }
inline double mta_sqrt(double x) { return __builtin_sqrt(x); }
inline double mta_to_double(float x) { return (double)x; }
#endif

// c ? a : b without a branch. Written as a ternary on the host, the compiler
// sinks each arm's arithmetic into its own branch, may not speculate it back
// (-ftrapping-math, the default), and then refuses to vectorize the loop.
// Whole bit patterns are selected, so the result is exactly a or b. U is an
// unsigned word (mta_u32 or mta_u64): 0 - c is all ones when c holds.
template <class U>
MTA_HD inline U mta_select_bits(bool c, U a, U b) {
#if defined(__CUDA_ARCH__)
    return c ? a : b;
#else
    const U mask = (U)0 - (U)c;
    return (a & mask) | (b & ~mask);
#endif
}

MTA_HD inline mta_u32 mta_select(bool c, mta_u32 a, mta_u32 b) { return mta_select_bits(c, a, b); }
MTA_HD inline mta_u64 mta_select(bool c, mta_u64 a, mta_u64 b) { return mta_select_bits(c, a, b); }

MTA_HD inline float mta_select(bool c, float a, float b) {
    return mta_float_from_bits(mta_select(c, mta_float_bits(a), mta_float_bits(b)));
}

MTA_HD inline double mta_select(bool c, double a, double b) {
    return mta_double_from_bits(mta_select(c, mta_double_bits(a), mta_double_bits(b)));
}

// |a| >= |b| as IEEE defines it (false when either is NaN), on bits: for
// magnitudes, float order is unsigned integer order, subnormals included.
MTA_HD inline bool mta_abs_ge(float a, float b) {
    const mta_u32 x = mta_float_bits(a) & 0x7fffffffu;
    const mta_u32 y = mta_float_bits(b) & 0x7fffffffu;
    return (x >= y) & (x <= 0x7f800000u) & (y <= 0x7f800000u);
}

MTA_HD inline bool mta_abs_ge(double a, double b) {
    const mta_u64 x = mta_double_bits(a) & 0x7fffffffffffffffull;
    const mta_u64 y = mta_double_bits(b) & 0x7fffffffffffffffull;
    return (x >= y) & (x <= 0x7ff0000000000000ull) & (y <= 0x7ff0000000000000ull);
}

// max(|a|, |b|), on bits. A NaN operand gives either |a| or |b| (the L2 norm,
// its only user, returns the NaN sum before it looks at a max).
MTA_HD inline double mta_max_magnitude(double a, double b) {
    const double x = mta_double_from_bits(mta_double_bits(a) & 0x7fffffffffffffffull);
    const double y = mta_double_from_bits(mta_double_bits(b) & 0x7fffffffffffffffull);
    return mta_select(mta_abs_ge(x, y), x, y);
}

// x != 0 as IEEE defines it (true for NaN, false for -0), on bits.
MTA_HD inline bool mta_nonzero(float x) { return (mta_float_bits(x) & 0x7fffffffu) != 0; }
MTA_HD inline bool mta_nonzero(double x) { return (mta_double_bits(x) & 0x7fffffffffffffffull) != 0; }

// --------------------------------------------------- 16-bit float -> fp32

// Branch-free (see mta_select) so the host compiler vectorizes it.
// Subnormals are renormalized by one exact fp32 subtraction (Sterbenz, all
// operands normal); inf/nan keep their payload, as NumPy's own cast does.
MTA_HD inline float mta_half_to_float(mta_u16 h) {
    const mta_u32 shifted_exp = 0x7c00u << 13;
    const mta_u32 magnitude = ((mta_u32)(h & 0x7fffu) << 13) + ((127u - 15u) << 23);
    const mta_u32 exp = shifted_exp & ((mta_u32)h << 13);
    const mta_u32 inf_nan = magnitude + ((128u - 16u) << 23);
    const mta_u32 subnormal =
        mta_float_bits(mta_sub(mta_float_from_bits(magnitude + (1u << 23)), mta_float_from_bits(113u << 23)));
    const mta_u32 o = mta_select(exp == shifted_exp, inf_nan, mta_select(exp == 0u, subnormal, magnitude));
    return mta_float_from_bits(o | ((mta_u32)(h & 0x8000u) << 16));
}

MTA_HD inline float mta_bfloat16_to_float(mta_u16 h) {
    return mta_float_from_bits((mta_u32)h << 16);
}

// A stored gradient widened (exactly) to the accumulator type A.
template <class A> struct MtaWiden;
template <> struct MtaWiden<float> {
    MTA_HD static float from(float x) { return x; }
    MTA_HD static float from(mta_half x) { return mta_half_to_float(x.bits); }
    MTA_HD static float from(mta_bfloat16 x) { return mta_bfloat16_to_float(x.bits); }
};
template <> struct MtaWiden<double> {
    MTA_HD static double from(double x) { return x; }
    MTA_HD static double from(float x) { return mta_to_double(x); }
};

template <class A, class G>
MTA_HD inline A mta_widen(G g) {
    return MtaWiden<A>::from(g);
}

// The non-finite test looks at exponent bits of the stored value, so it costs
// two integer operations and never depends on the compiler's isfinite.
MTA_HD inline bool mta_is_finite(float x) {
    return (mta_float_bits(x) & 0x7f800000u) != 0x7f800000u;
}
MTA_HD inline bool mta_is_finite(double x) {
    return (mta_double_bits(x) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}
MTA_HD inline bool mta_is_finite(mta_half x) { return (x.bits & 0x7c00u) != 0x7c00u; }
MTA_HD inline bool mta_is_finite(mta_bfloat16 x) { return (x.bits & 0x7f80u) != 0x7f80u; }

// ------------------------------------------------------ accumulation modes

enum MtaAccumulateMode {
    MTA_MODE_ADD = 0,                 // acc += y
    MTA_MODE_COPY = 1,                // acc = y (first micro-batch: no zeroing pass)
    MTA_MODE_ADD_COMPENSATED = 2,     // Neumaier: acc + comp carries the exact sum
    MTA_MODE_COPY_COMPENSATED = 3,    // acc = y, comp = 0
    MTA_MODE_ADD_STOCHASTIC = 4,      // bfloat16 acc = SR(float(acc) + y)
    MTA_MODE_COPY_STOCHASTIC = 5,     // bfloat16 acc = SR(y)
};

template <int MODE>
struct MtaMode {
    static constexpr bool reads_acc =
        MODE == MTA_MODE_ADD || MODE == MTA_MODE_ADD_COMPENSATED || MODE == MTA_MODE_ADD_STOCHASTIC;
    static constexpr bool compensated =
        MODE == MTA_MODE_ADD_COMPENSATED || MODE == MTA_MODE_COPY_COMPENSATED;
    static constexpr bool stochastic = MODE == MTA_MODE_ADD_STOCHASTIC || MODE == MTA_MODE_COPY_STOCHASTIC;
};

// Neumaier's variant of Kahan summation: the select picks the operand whose
// low bits were lost, so it stays exact when |y| > |acc| (plain Kahan does not).
template <class A>
MTA_HD inline void mta_neumaier_add(A& acc, A& comp, A y) {
    const A t = mta_add(acc, y);
    const A lost_from_y = mta_add(mta_sub(acc, t), y);
    const A lost_from_acc = mta_add(mta_sub(y, t), acc);
    comp = mta_add(comp, mta_select(mta_abs_ge(acc, y), lost_from_y, lost_from_acc));
    acc = t;
}

// y is s * g already rounded to the accumulator type.
template <int MODE, class A>
MTA_HD inline void mta_accumulate_element(A& acc, A& comp, A y) {
    if constexpr (MODE == MTA_MODE_ADD) {
        acc = mta_add(acc, y);
    } else if constexpr (MODE == MTA_MODE_COPY) {
        acc = y;
    } else if constexpr (MODE == MTA_MODE_ADD_COMPENSATED) {
        mta_neumaier_add(acc, comp, y);
    } else {
        acc = y;
        comp = A(0);
    }
}

// s * g, the scaled gradient every accumulation kernel adds.
template <class A, class G>
MTA_HD inline A mta_scaled(A s, G g) {
    return mta_mul(s, mta_widen<A>(g));
}

// ------------------------------------------------ bfloat16 accumulators

// A bfloat16 buffer is summed in float32: acc is widened (exactly), s * g and acc + s * g are
// float32 operations as above, and only the sum is rounded back to bfloat16 (8 bits of
// significand: a unit in the last place is 2^-7 of the value's power of two). To nearest,
// the sum loses every addend smaller than half a unit, so a long sum stalls; stochastically,
// it is rounded up with probability equal to the fraction of a unit it discards, so the
// rounded sum is the exact one in expectation and its error grows like sqrt(k) units instead
// of k. Both work on bits (exact, every compiler alike). A NaN stays NaN with its sign and
// top payload bits, quieted: (bits >> 16) | 0x40.

// A float32's bits made safe to round: a NaN is quieted (0x400000) and its low half cleared, so
// that nothing added below the kept bits can carry out of it; the kept bits are then
// (bits >> 16) | 0x40. Other values are left as they are. Written without a select, so that
// the host compiler keeps the vector loops in 32-bit lanes until the final narrowing.
MTA_HD inline mta_u32 mta_bfloat16_roundable(mta_u32 u) {
    const mta_u32 nan = 0u - (mta_u32)((u & 0x7fffffffu) > 0x7f800000u);
    return (u & ~(nan & 0xffffu)) | (nan & 0x400000u);
}

// To nearest, ties to even: adding 0x7fff (+1 when the kept part is odd) carries into the
// kept bits exactly when the discarded ones are above half (or at half with an odd kept part);
// a carry out of the largest finite value gives inf, as it must.
MTA_HD inline mta_u16 mta_bfloat16_round_nearest(float x) {
    const mta_u32 u = mta_bfloat16_roundable(mta_float_bits(x));
    return (mta_u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Stochastically, with r uniform in [0, 2^16): the carry into the kept bits happens for
// exactly (discarded bits) of the 2^16 values of r, so the magnitude is rounded up with
// probability (discarded bits) / 2^16, the fraction of a unit that is discarded (zero for a
// value bfloat16 holds exactly). It works on the magnitude's bits, so it is unbiased for
// either sign; subnormals round like any value; a finite value within one unit of the largest
// rounds to inf with that probability; inf stays inf.
MTA_HD inline mta_u16 mta_bfloat16_round_stochastic(float x, mta_u32 r) {
    const mta_u32 u = mta_bfloat16_roundable(mta_float_bits(x));
    return (mta_u16)((u + (r & 0xffffu)) >> 16);
}

// ------------------------------------------- the random bits of stochastic rounding

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
// Random123 library's philox4x32_R with R = 10): a counter-based generator, so the bits of
// any counter are computed directly, with no state to carry between threads or calls. Ten
// rounds of two 32 x 32 -> 64-bit products and xors; integer arithmetic, so exact everywhere.
// Known answer (Random123's kat_vectors): counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
// The high and low words of each product are written apart: on the device they are one
// mul.hi.u32 and one mul.lo.u32. The native loops take whole tiles of blocks from the same
// rounds written with AVX2/AVX-512 intrinsics (csrc/native/philox_simd.h), which GCC's own
// vectorization of these 32 x 32 -> 64-bit products runs at half the speed.
MTA_HD inline void mta_philox_round(mta_u32& c0, mta_u32& c1, mta_u32& c2, mta_u32& c3, mta_u32 k0, mta_u32 k1) {
    const mta_u32 hi0 = (mta_u32)(((mta_u64)0xD2511F53u * c0) >> 32);
    const mta_u32 hi1 = (mta_u32)(((mta_u64)0xCD9E8D57u * c2) >> 32);
    const mta_u32 lo0 = 0xD2511F53u * c0;
    const mta_u32 lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c2 = hi0 ^ c3 ^ k1;
    c1 = lo1;
    c3 = lo0;
}

// The rounds are written out, on scalars (an array of counters would be kept in memory).
MTA_HD inline void mta_philox4x32_10(mta_u32& c0, mta_u32& c1, mta_u32& c2, mta_u32& c3, mta_u32 k0, mta_u32 k1) {
#define MTA_PHILOX_ROUND                          \
    mta_philox_round(c0, c1, c2, c3, k0, k1);     \
    k0 += 0x9E3779B9u;                            \
    k1 += 0xBB67AE85u;
    MTA_PHILOX_ROUND MTA_PHILOX_ROUND MTA_PHILOX_ROUND MTA_PHILOX_ROUND MTA_PHILOX_ROUND
    MTA_PHILOX_ROUND MTA_PHILOX_ROUND MTA_PHILOX_ROUND MTA_PHILOX_ROUND MTA_PHILOX_ROUND
#undef MTA_PHILOX_ROUND
}

MTA_HD inline void mta_philox4x32_10(mta_u32 c[4], mta_u32 k0, mta_u32 k1) {
    mta_philox4x32_10(c[0], c[1], c[2], c[3], k0, k1);
}

// Where a stochastic-rounding call takes its random bits. Element e of the stream (an arena's
// flat index: the array's first element is `first`) gets 16 bits of the Philox block e / 8
// keyed by the seed, at counter (e / 8 low word, e / 8 high word, micro_batch, window):
// lane e % 8 is the low (even lane) or high (odd lane) half of word (e % 8) / 2. So the bits
// depend on (seed, window, micro-batch, element) alone, never on a thread, a launch shape, a
// chunk or a path: every path rounds alike, and a run resumed mid-window draws what it would
// have drawn.
struct MtaRoundingStream {
    mta_u64 seed;
    mta_u32 window;
    mta_u32 micro_batch;
    mta_u64 first;  // the stream index of the array's element 0
};

// The 4 words (8 elements' bits) of block `block` of the stream.
MTA_HD inline void mta_rounding_block(const MtaRoundingStream& s, mta_u64 block, mta_u32 words[4]) {
    words[0] = (mta_u32)block;
    words[1] = (mta_u32)(block >> 32);
    words[2] = s.micro_batch;
    words[3] = s.window;
    mta_philox4x32_10(words, (mta_u32)s.seed, (mta_u32)(s.seed >> 32));
}

// The 16 bits of lane `lane` (0..7) of a block's words.
MTA_HD inline mta_u32 mta_rounding_lane(const mta_u32 words[4], unsigned lane) {
    return (words[lane >> 1] >> ((lane & 1u) * 16u)) & 0xffffu;
}

// The 16 bits of element i of the array (stream index first + i), from its block alone.
MTA_HD inline mta_u32 mta_rounding_bits(const MtaRoundingStream& s, mta_u64 i) {
    const mta_u64 e = s.first + i;
    mta_u32 words[4];
    mta_rounding_block(s, e >> 3, words);
    return mta_rounding_lane(words, (unsigned)(e & 7u));
}

// One element of a bfloat16 accumulator: y = s * g in float32 (mta_scaled), then
// acc = round(float(acc) + y) (add modes) or round(y) (copy modes); r: its 16 random bits
// (ignored when rounding to nearest).
template <int MODE>
MTA_HD inline mta_u16 mta_accumulate_bfloat16(mta_u16 acc, float y, mta_u32 r) {
    float sum = y;
    if constexpr (MtaMode<MODE>::reads_acc) sum = mta_add(mta_bfloat16_to_float(acc), y);
    if constexpr (MtaMode<MODE>::stochastic) {
        return mta_bfloat16_round_stochastic(sum, r);
    } else {
        return mta_bfloat16_round_nearest(sum);
    }
}

// -------------------------------------------------------- optimizer steps

// Host-computed scalars, each rounded once from float64 to T (the host derives
// them in minitorch_accum/kernels/optimizer_scalars.py); passed to kernels by value.
// Each struct's fields are listed once, here: REAL(name) is a T, FLAG(name) an
// int (0 or 1). The struct, its host helpers (the native module's reading of
// the Python dataclass, whose fields are these in this order, and the layout
// the tests compare with the launch planner's NumPy twin) are expanded from it.
#define MTA_SGD_SCALARS(REAL, FLAG)                                                         \
    REAL(lr)                                                                                \
    REAL(momentum)                                                                          \
    REAL(dampening_complement) /* 1 - dampening */                                          \
    REAL(weight_decay)                                                                      \
    REAL(grad_scale) /* the window's 1/k or 1/N_items, times any loss-scale unscale */      \
    FLAG(nesterov)                                                                          \
    FLAG(first_step) /* the buffer is written, not read: buf = g */

#define MTA_ADAM_SCALARS(REAL, FLAG)                                                        \
    REAL(decay)                 /* 1 - lr * weight_decay (decoupled only) */                \
    REAL(weight_decay)          /* Adam's L2 term (coupled only) */                         \
    REAL(beta1)                                                                             \
    REAL(beta1_complement)      /* 1 - beta1 */                                             \
    REAL(beta2)                                                                             \
    REAL(beta2_complement)      /* 1 - beta2 */                                             \
    REAL(step_size)             /* lr / (1 - beta1^step) */                                 \
    REAL(bias_correction2_sqrt) /* sqrt(1 - beta2^step) */                                  \
    REAL(eps)                                                                               \
    REAL(grad_scale)                                                                        \
    FLAG(decoupled)

#define MTA_REAL_FIELD(name) T name;
#define MTA_FLAG_FIELD(name) int name;

// Host-side helpers of each scalars struct, expanded from its field list:
// from() converts every field of another instance (float64 to T: the one
// rounding), for_each_field() calls f(name, member pointer) for each field in
// order (the native module reads the Python dataclass and reports the layout
// with it). The device never needs them.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MTA_SCALARS_HOST_HELPERS(Struct, FIELDS)
#else
#define MTA_CONVERT_FIELD(name) out.name = static_cast<decltype(out.name)>(s.name);
#define MTA_VISIT_FIELD(name) f(#name, &Self::name);
#define MTA_SCALARS_HOST_HELPERS(Struct, FIELDS)                                             \
    using Self = Struct;                                                                      \
    template <class U>                                                                        \
    static Struct from(const Struct<U>& s) {                                                  \
        Struct out;                                                                           \
        FIELDS(MTA_CONVERT_FIELD, MTA_CONVERT_FIELD)                                          \
        return out;                                                                           \
    }                                                                                         \
    template <class F>                                                                        \
    static void for_each_field(F&& f) {                                                       \
        FIELDS(MTA_VISIT_FIELD, MTA_VISIT_FIELD)                                              \
    }
#endif

template <class T>
struct MtaSgdScalars {
    MTA_SGD_SCALARS(MTA_REAL_FIELD, MTA_FLAG_FIELD)
    MTA_SCALARS_HOST_HELPERS(MtaSgdScalars, MTA_SGD_SCALARS)
};

template <class T>
struct MtaAdamScalars {
    MTA_ADAM_SCALARS(MTA_REAL_FIELD, MTA_FLAG_FIELD)
    MTA_SCALARS_HOST_HELPERS(MtaAdamScalars, MTA_ADAM_SCALARS)
};

#undef MTA_REAL_FIELD
#undef MTA_FLAG_FIELD

// PyTorch SGD semantics:
//   g = grad * grad_scale; if wd != 0: g = g + wd * p
//   if momentum != 0: buf = first_step ? g : momentum * buf + (1 - dampening) * g
//                     g = nesterov ? g + momentum * buf : buf
//   p = p - lr * g
// buf is left as it was when momentum == 0 (callers then pass any scratch).
template <class T>
MTA_HD inline void mta_sgd_momentum_update(T& p, T grad, T& buf, const MtaSgdScalars<T>& h) {
    const T scaled = mta_mul(grad, h.grad_scale);
    const T decayed = mta_add(scaled, mta_mul(h.weight_decay, p));
    const T g = mta_select(mta_nonzero(h.weight_decay), decayed, scaled);
    const T averaged = mta_add(mta_mul(h.momentum, buf), mta_mul(h.dampening_complement, g));
    const T b = mta_select(h.first_step != 0, g, averaged);
    const T nesterov = mta_add(g, mta_mul(h.momentum, b));
    const bool has_momentum = mta_nonzero(h.momentum);
    const T direction = mta_select(has_momentum, mta_select(h.nesterov != 0, nesterov, b), g);
    buf = mta_select(has_momentum, b, buf);
    p = mta_sub(p, mta_mul(h.lr, direction));
}

// PyTorch AdamW (decoupled) / Adam-L2 semantics with one fixed formula:
//   g = grad * grad_scale;  decoupled: p = p * (1 - lr * wd);  else if wd != 0: g = g + wd * p
//   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * (g * g)
//   denom = sqrt(v) / sqrt(1 - b2^step) + eps;  p = p - (lr / (1 - b1^step)) * (m / denom)
template <class T>
MTA_HD inline void mta_adam_update(T& p, T grad, T& m, T& v, const MtaAdamScalars<T>& h) {
    const T scaled = mta_mul(grad, h.grad_scale);
    const T with_l2 = mta_add(scaled, mta_mul(h.weight_decay, p));
    const T g = mta_select(!h.decoupled && mta_nonzero(h.weight_decay), with_l2, scaled);
    const T q = mta_select(h.decoupled != 0, mta_mul(p, h.decay), p);
    m = mta_add(mta_mul(h.beta1, m), mta_mul(h.beta1_complement, g));
    v = mta_add(mta_mul(h.beta2, v), mta_mul(h.beta2_complement, mta_mul(g, g)));
    const T denom = mta_add(mta_div(mta_sqrt(v), h.bias_correction2_sqrt), h.eps);
    p = mta_sub(q, mta_mul(h.step_size, mta_div(m, denom)));
}

// Fused gradient accumulation kernels: acc (+)= s * g, plain or compensated,
// with an optional non-finite flag, over one array (grid-stride) or over a
// list of arrays in one launch (chunk table).
//
// Supported (accumulator, gradient) pairs: (f32, f32), (f32, f16), (f32, bf16),
// (f64, f64), (f64, f32). The gradient is widened exactly to the accumulator
// type, then multiplied by the scale already rounded to that type. A bfloat16
// accumulator takes f32, f16 and bf16 gradients: it is summed in float32 and
// each sum rounded back, to nearest (add_scale, copy_scale, cast_add_scale) or
// stochastically (the *_stochastic kernels, with a Philox stream of random bits).
//
// Byte counts below are per element for fp32 accumulators and fp32 gradients
// unless said otherwise; they are what the kernel must move, the quantity the
// benchmarks divide by time to get bandwidth.
#include "accum_math.cuh"
#include "kernel_loops.cuh"
#include "multi_tensor.cuh"

template <class A, class G, int MODE, bool CHECK>
struct MtaAccumulateOp {
    A* acc;
    A* comp;
    const G* g;
    A scale;
    bool nonfinite;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        const MtaPack<W, G> x = mta_load<W>(g + i);
        MtaPack<W, A> a;
        MtaPack<W, A> c;
        if constexpr (MtaMode<MODE>::reads_acc) a = mta_load<W>(acc + i);
        if constexpr (MODE == MTA_MODE_ADD_COMPENSATED) c = mta_load<W>(comp + i);
        MTA_UNROLL
        for (int k = 0; k < W; ++k) {
            if constexpr (CHECK) nonfinite = nonfinite || !mta_is_finite(x.v[k]);
            const A y = mta_scaled(scale, x.v[k]);
            mta_accumulate_element<MODE>(a.v[k], c.v[k], y);
        }
        mta_store<W>(acc + i, a);
        if constexpr (MtaMode<MODE>::compensated) mta_store<W>(comp + i, c);
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(acc) && mta_pack_aligned<W>(g) && mta_pack_aligned<W>(comp);
    }
};

// acc(bf16) (+)= s * g, summed in float32 and rounded back to nearest or stochastically
// (mta_accumulate_bfloat16). A pack is 8 elements: 16 bytes of acc and exactly one Philox
// block of the rounding stream, when the array's first stream index is a multiple of 8 (an
// arena's view always is: views start on 64-byte lines); otherwise each element computes its
// own block, for the same bits at 8 times the work.
template <class G, int MODE, bool CHECK>
struct MtaBfloat16AccumulateOp {
    mta_bfloat16* acc;
    const G* g;
    float scale;
    MtaRoundingStream stream;
    bool nonfinite;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        const MtaPack<W, G> x = mta_load<W>(g + i);
        MtaPack<W, mta_bfloat16> a{};
        if constexpr (MtaMode<MODE>::reads_acc) a = mta_load<W>(acc + i);
        mta_u32 words[4] = {0u, 0u, 0u, 0u};
        if constexpr (MtaMode<MODE>::stochastic && W == 8) {
            mta_rounding_block(stream, (stream.first + i) >> 3, words);
        }
        MTA_UNROLL
        for (int k = 0; k < W; ++k) {
            if constexpr (CHECK) nonfinite = nonfinite || !mta_is_finite(x.v[k]);
            mta_u32 r = 0u;
            if constexpr (MtaMode<MODE>::stochastic) {
                r = W == 8 ? mta_rounding_lane(words, (unsigned)k) : mta_rounding_bits(stream, i + k);
            }
            a.v[k].bits = mta_accumulate_bfloat16<MODE>(a.v[k].bits, mta_scaled(scale, x.v[k]), r);
        }
        mta_store<W>(acc + i, a);
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(acc) && mta_pack_aligned<W>(g) &&
               (!MtaMode<MODE>::stochastic || stream.first % W == 0);
    }
};

template <class G, int MODE, bool CHECK>
__device__ __forceinline__ void mta_accumulate_into_bfloat16_checked(mta_bfloat16* acc, const G* g, mta_u64 n,
                                                                      float scale, const MtaRoundingStream& stream,
                                                                      int* flag, bool whole_grid) {
    MtaBfloat16AccumulateOp<G, MODE, CHECK> op{acc, g, scale, stream, false};
    if (whole_grid) {
        mta_grid_stride_apply<8>(op, n);
    } else {
        mta_block_apply<8>(op, n);
    }
    if (CHECK && op.nonfinite) *flag = 1;
}

template <class G, int MODE>
__device__ __forceinline__ void mta_accumulate_into_bfloat16(mta_bfloat16* acc, const G* g, mta_u64 n, float scale,
                                                             const MtaRoundingStream& stream, int* flag,
                                                             bool whole_grid) {
    if (flag) {
        mta_accumulate_into_bfloat16_checked<G, MODE, true>(acc, g, n, scale, stream, flag, whole_grid);
    } else {
        mta_accumulate_into_bfloat16_checked<G, MODE, false>(acc, g, n, scale, stream, flag, whole_grid);
    }
}

// One 16-byte accumulator pack per step: 4 fp32 or 2 fp64 elements.
template <class A>
struct MtaAccumulateWidth {
    static constexpr int value = 16 / sizeof(A);
};

// The flag is written (never cleared) only by threads that saw inf/nan; all
// write the same value, so the race is benign and needs no atomic.
template <class A, class G, int MODE, bool CHECK>
__device__ __forceinline__ void mta_accumulate_checked(A* acc, A* comp, const G* g, mta_u64 n, A scale,
                                                       int* flag, bool whole_grid) {
    constexpr int W = MtaAccumulateWidth<A>::value;
    MtaAccumulateOp<A, G, MODE, CHECK> op{acc, comp, g, scale, false};
    if (whole_grid) {
        mta_grid_stride_apply<W>(op, n);
    } else {
        mta_block_apply<W>(op, n);
    }
    if (CHECK && op.nonfinite) *flag = 1;
}

template <class A, class G, int MODE>
__device__ __forceinline__ void mta_accumulate(A* acc, A* comp, const G* g, mta_u64 n, A scale, int* flag,
                                               bool whole_grid) {
    if (flag) {
        mta_accumulate_checked<A, G, MODE, true>(acc, comp, g, n, scale, flag, whole_grid);
    } else {
        mta_accumulate_checked<A, G, MODE, false>(acc, comp, g, n, scale, flag, whole_grid);
    }
}

// The block's chunk of a bfloat16 accumulator: row 0 of the table holds the accumulators, the
// last row the gradients; the stream (unused when rounding to nearest) numbers the chunk's
// elements from its tensor's first stream index.
template <int MODE, int DEPTH>
__device__ __forceinline__ void mta_bfloat16_block(const MtaTensorTable<DEPTH>& table, const MtaChunk& c, float scale,
                                                   int* flag, const MtaRoundingStream& stream = {0, 0, 0, 0}) {
    mta_bfloat16* acc = mta_table_array<mta_bfloat16>(table, 0, c);
    const int grad_row = DEPTH - 1;
    switch (table.kinds[c.tensor]) {
        case MTA_KIND_BF16_F32:
            mta_accumulate_into_bfloat16<float, MODE>(acc, mta_table_array<const float>(table, grad_row, c), c.length,
                                                      scale, stream, flag, false);
            break;
        case MTA_KIND_BF16_F16:
            mta_accumulate_into_bfloat16<mta_half, MODE>(acc, mta_table_array<const mta_half>(table, grad_row, c),
                                                         c.length, scale, stream, flag, false);
            break;
        case MTA_KIND_BF16_BF16:
            mta_accumulate_into_bfloat16<mta_bfloat16, MODE>(
                acc, mta_table_array<const mta_bfloat16>(table, grad_row, c), c.length, scale, stream, flag, false);
            break;
        default:
            break;
    }
}

// The block's chunk of a stochastic multi-tensor launch. Its table has depth 3: row 0 the
// accumulators, row 2 the gradients, and row 1 not addresses but each tensor's first index in
// the rounding stream (its offset in the arena), so a list rounds as its arena would.
template <int MODE>
__device__ __forceinline__ void mta_stochastic_block(const MtaTensorTable<3>& table, float scale, mta_u64 seed,
                                                     mta_u32 window, mta_u32 micro_batch, int* flag) {
    const MtaChunk c = mta_block_chunk(table);
    const MtaRoundingStream stream{seed, window, micro_batch, table.addresses[1][c.tensor] + c.begin};
    mta_bfloat16_block<MODE>(table, c, scale, flag, stream);
}

// The block's chunk of a multi-tensor launch; the tensor's kind picks the
// dtype pair, so one launch serves a list of mixed dtypes. Row 0 of the table
// holds accumulators, the last row gradients, row 1 compensations (depth 3).
template <int MODE, int DEPTH>
__device__ __forceinline__ void mta_accumulate_block(const MtaTensorTable<DEPTH>& table, float scale_f32,
                                                     double scale_f64, int* flag) {
    const MtaChunk c = mta_block_chunk(table);
    const int grad_row = DEPTH - 1;
    switch (table.kinds[c.tensor]) {
        case MTA_KIND_F32_F32:
            mta_accumulate<float, float, MODE>(
                mta_table_array<float>(table, 0, c), DEPTH == 3 ? mta_table_array<float>(table, 1, c) : nullptr,
                mta_table_array<const float>(table, grad_row, c), c.length, scale_f32, flag, false);
            break;
        case MTA_KIND_F32_F16:
            mta_accumulate<float, mta_half, MODE>(
                mta_table_array<float>(table, 0, c), DEPTH == 3 ? mta_table_array<float>(table, 1, c) : nullptr,
                mta_table_array<const mta_half>(table, grad_row, c), c.length, scale_f32, flag, false);
            break;
        case MTA_KIND_F32_BF16:
            mta_accumulate<float, mta_bfloat16, MODE>(
                mta_table_array<float>(table, 0, c), DEPTH == 3 ? mta_table_array<float>(table, 1, c) : nullptr,
                mta_table_array<const mta_bfloat16>(table, grad_row, c), c.length, scale_f32, flag, false);
            break;
        case MTA_KIND_F64_F64:
            mta_accumulate<double, double, MODE>(
                mta_table_array<double>(table, 0, c), DEPTH == 3 ? mta_table_array<double>(table, 1, c) : nullptr,
                mta_table_array<const double>(table, grad_row, c), c.length, scale_f64, flag, false);
            break;
        case MTA_KIND_F64_F32:
            mta_accumulate<double, float, MODE>(
                mta_table_array<double>(table, 0, c), DEPTH == 3 ? mta_table_array<double>(table, 1, c) : nullptr,
                mta_table_array<const float>(table, grad_row, c), c.length, scale_f64, flag, false);
            break;
        default:
            // bfloat16 accumulators, rounded to nearest (the compensated kernels take none)
            if constexpr (!MtaMode<MODE>::compensated) mta_bfloat16_block<MODE>(table, c, scale_f32, flag);
            break;
    }
}

// ------------------------------------------------------------ one array

#define MTA_ACCUMULATE_KERNEL(name, MODE, A, G)                                                \
    extern "C" __global__ void name(A* acc, const G* g, mta_u64 n, A scale, int* flag) {      \
        mta_accumulate<A, G, MODE>(acc, nullptr, g, n, scale, flag, true);                     \
    }

#define MTA_COMPENSATED_KERNEL(name, MODE, A, G)                                                        \
    extern "C" __global__ void name(A* acc, A* comp, const G* g, mta_u64 n, A scale, int* flag) {     \
        mta_accumulate<A, G, MODE>(acc, comp, g, n, scale, flag, true);                                 \
    }

// add_scale: acc += s * g (12 B/elem: acc read + write, g read; fp64: 24)
MTA_ACCUMULATE_KERNEL(mta_add_scale_f32_f32, MTA_MODE_ADD, float, float)
MTA_ACCUMULATE_KERNEL(mta_add_scale_f64_f64, MTA_MODE_ADD, double, double)
MTA_ACCUMULATE_KERNEL(mta_add_scale_f64_f32, MTA_MODE_ADD, double, float)

// cast_add_scale: acc(fp32) += s * float(g(fp16/bf16)) in one pass, no converted copy (10 B/elem)
MTA_ACCUMULATE_KERNEL(mta_cast_add_scale_f32_f16, MTA_MODE_ADD, float, mta_half)
MTA_ACCUMULATE_KERNEL(mta_cast_add_scale_f32_bf16, MTA_MODE_ADD, float, mta_bfloat16)

// copy_scale: acc = s * g, the first micro-batch of a window, so no zeroing pass (8 B/elem)
MTA_ACCUMULATE_KERNEL(mta_copy_scale_f32_f32, MTA_MODE_COPY, float, float)
MTA_ACCUMULATE_KERNEL(mta_copy_scale_f32_f16, MTA_MODE_COPY, float, mta_half)
MTA_ACCUMULATE_KERNEL(mta_copy_scale_f32_bf16, MTA_MODE_COPY, float, mta_bfloat16)
MTA_ACCUMULATE_KERNEL(mta_copy_scale_f64_f64, MTA_MODE_COPY, double, double)
MTA_ACCUMULATE_KERNEL(mta_copy_scale_f64_f32, MTA_MODE_COPY, double, float)

// add_scale_compensated: Neumaier acc, comp += s * g; acc + comp is the sum (20 B/elem)
MTA_COMPENSATED_KERNEL(mta_add_scale_compensated_f32_f32, MTA_MODE_ADD_COMPENSATED, float, float)
MTA_COMPENSATED_KERNEL(mta_add_scale_compensated_f32_f16, MTA_MODE_ADD_COMPENSATED, float, mta_half)
MTA_COMPENSATED_KERNEL(mta_add_scale_compensated_f32_bf16, MTA_MODE_ADD_COMPENSATED, float, mta_bfloat16)
MTA_COMPENSATED_KERNEL(mta_add_scale_compensated_f64_f64, MTA_MODE_ADD_COMPENSATED, double, double)
MTA_COMPENSATED_KERNEL(mta_add_scale_compensated_f64_f32, MTA_MODE_ADD_COMPENSATED, double, float)

// copy_scale_compensated: acc = s * g, comp = 0, the first micro-batch of a window (12 B/elem)
MTA_COMPENSATED_KERNEL(mta_copy_scale_compensated_f32_f32, MTA_MODE_COPY_COMPENSATED, float, float)
MTA_COMPENSATED_KERNEL(mta_copy_scale_compensated_f32_f16, MTA_MODE_COPY_COMPENSATED, float, mta_half)
MTA_COMPENSATED_KERNEL(mta_copy_scale_compensated_f32_bf16, MTA_MODE_COPY_COMPENSATED, float, mta_bfloat16)
MTA_COMPENSATED_KERNEL(mta_copy_scale_compensated_f64_f64, MTA_MODE_COPY_COMPENSATED, double, double)
MTA_COMPENSATED_KERNEL(mta_copy_scale_compensated_f64_f32, MTA_MODE_COPY_COMPENSATED, double, float)

// A bfloat16 acc, rounded to nearest: add_scale (8 B/elem from fp32 g), cast_add_scale and
// copy_scale (6 each: a 16-bit g read, acc read and written / a 32-bit g read, acc written)
#define MTA_BFLOAT16_KERNEL(name, MODE, G)                                                        \
    extern "C" __global__ void name(mta_bfloat16* acc, const G* g, mta_u64 n, float scale, int* flag) { \
        mta_accumulate_into_bfloat16<G, MODE>(acc, g, n, scale, MtaRoundingStream{0, 0, 0, 0}, flag, true); \
    }

MTA_BFLOAT16_KERNEL(mta_add_scale_bf16_f32, MTA_MODE_ADD, float)
MTA_BFLOAT16_KERNEL(mta_cast_add_scale_bf16_f16, MTA_MODE_ADD, mta_half)
MTA_BFLOAT16_KERNEL(mta_cast_add_scale_bf16_bf16, MTA_MODE_ADD, mta_bfloat16)
MTA_BFLOAT16_KERNEL(mta_copy_scale_bf16_f32, MTA_MODE_COPY, float)
MTA_BFLOAT16_KERNEL(mta_copy_scale_bf16_f16, MTA_MODE_COPY, mta_half)
MTA_BFLOAT16_KERNEL(mta_copy_scale_bf16_bf16, MTA_MODE_COPY, mta_bfloat16)

// The stochastic kernels: element i of acc takes the random bits of stream index offset + i
// of Philox4x32-10 keyed by seed at (window, micro_batch) (MtaRoundingStream).
#define MTA_STOCHASTIC_KERNEL(name, MODE, G)                                                               \
    extern "C" __global__ void name(mta_bfloat16* acc, const G* g, mta_u64 n, float scale, mta_u64 seed,      \
                                    mta_u32 window, mta_u32 micro_batch, mta_u64 offset, int* flag) {          \
        mta_accumulate_into_bfloat16<G, MODE>(acc, g, n, scale, MtaRoundingStream{seed, window, micro_batch, offset}, \
                                              flag, true);                                                     \
    }

// add_scale_stochastic: acc(bf16) = SR(float(acc) + s * g) (8 B/elem: acc read + written, 2 B each; fp32 g read)
MTA_STOCHASTIC_KERNEL(mta_add_scale_stochastic_bf16_f32, MTA_MODE_ADD_STOCHASTIC, float)

// cast_add_scale_stochastic: acc(bf16) = SR(float(acc) + s * float(g(fp16/bf16))) in one pass (6 B/elem)
MTA_STOCHASTIC_KERNEL(mta_cast_add_scale_stochastic_bf16_f16, MTA_MODE_ADD_STOCHASTIC, mta_half)
MTA_STOCHASTIC_KERNEL(mta_cast_add_scale_stochastic_bf16_bf16, MTA_MODE_ADD_STOCHASTIC, mta_bfloat16)

// copy_scale_stochastic: acc(bf16) = SR(s * g), the first micro-batch of a window (6 B/elem from fp32 g)
MTA_STOCHASTIC_KERNEL(mta_copy_scale_stochastic_bf16_f32, MTA_MODE_COPY_STOCHASTIC, float)
MTA_STOCHASTIC_KERNEL(mta_copy_scale_stochastic_bf16_f16, MTA_MODE_COPY_STOCHASTIC, mta_half)
MTA_STOCHASTIC_KERNEL(mta_copy_scale_stochastic_bf16_bf16, MTA_MODE_COPY_STOCHASTIC, mta_bfloat16)

// ------------------------------------------------------ a list of arrays

// multi_add_scale: acc_i += s * g_i over a list of mixed-dtype pairs, one launch per table (12 B/elem; 10 from bf16)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_add_scale(const __grid_constant__ MtaTensorTable<2> table, float scale_f32, double scale_f64,
                        int* flag) {
    mta_accumulate_block<MTA_MODE_ADD>(table, scale_f32, scale_f64, flag);
}

// multi_copy_scale: acc_i = s * g_i over a list of mixed-dtype pairs (8 B/elem)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_copy_scale(const __grid_constant__ MtaTensorTable<2> table, float scale_f32, double scale_f64,
                         int* flag) {
    mta_accumulate_block<MTA_MODE_COPY>(table, scale_f32, scale_f64, flag);
}

// multi_add_scale_compensated: Neumaier acc_i, comp_i += s * g_i over a list (20 B/elem)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_add_scale_compensated(const __grid_constant__ MtaTensorTable<3> table, float scale_f32,
                                    double scale_f64, int* flag) {
    mta_accumulate_block<MTA_MODE_ADD_COMPENSATED>(table, scale_f32, scale_f64, flag);
}

// multi_copy_scale_compensated: acc_i = s * g_i, comp_i = 0 over a list (12 B/elem)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_copy_scale_compensated(const __grid_constant__ MtaTensorTable<3> table, float scale_f32,
                                     double scale_f64, int* flag) {
    mta_accumulate_block<MTA_MODE_COPY_COMPENSATED>(table, scale_f32, scale_f64, flag);
}

// multi_add_scale_stochastic: add_scale_stochastic over a list of (acc bf16, g) pairs, each
// tensor's first stream index in the table's row 1 (8 B/elem; 6 from fp16/bf16)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_add_scale_stochastic(const __grid_constant__ MtaTensorTable<3> table, float scale, mta_u64 seed,
                                   mta_u32 window, mta_u32 micro_batch, int* flag) {
    mta_stochastic_block<MTA_MODE_ADD_STOCHASTIC>(table, scale, seed, window, micro_batch, flag);
}

// multi_copy_scale_stochastic: copy_scale_stochastic over a list (6 B/elem)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_copy_scale_stochastic(const __grid_constant__ MtaTensorTable<3> table, float scale, mta_u64 seed,
                                    mta_u32 window, mta_u32 micro_batch, int* flag) {
    mta_stochastic_block<MTA_MODE_COPY_STOCHASTIC>(table, scale, seed, window, micro_batch, flag);
}

// The kernels of this file with the most threads per block each accepts and
// whether it synchronizes its block: the emulator registers exactly these.
#define MTA_ACCUMULATE_KERNELS(X)                                   \
    X(mta_add_scale_f32_f32, 1024, false)                           \
    X(mta_add_scale_f64_f64, 1024, false)                           \
    X(mta_add_scale_f64_f32, 1024, false)                           \
    X(mta_cast_add_scale_f32_f16, 1024, false)                      \
    X(mta_cast_add_scale_f32_bf16, 1024, false)                     \
    X(mta_copy_scale_f32_f32, 1024, false)                          \
    X(mta_copy_scale_f32_f16, 1024, false)                          \
    X(mta_copy_scale_f32_bf16, 1024, false)                         \
    X(mta_copy_scale_f64_f64, 1024, false)                          \
    X(mta_copy_scale_f64_f32, 1024, false)                          \
    X(mta_add_scale_compensated_f32_f32, 1024, false)               \
    X(mta_add_scale_compensated_f32_f16, 1024, false)               \
    X(mta_add_scale_compensated_f32_bf16, 1024, false)              \
    X(mta_add_scale_compensated_f64_f64, 1024, false)               \
    X(mta_add_scale_compensated_f64_f32, 1024, false)               \
    X(mta_copy_scale_compensated_f32_f32, 1024, false)              \
    X(mta_copy_scale_compensated_f32_f16, 1024, false)              \
    X(mta_copy_scale_compensated_f32_bf16, 1024, false)             \
    X(mta_copy_scale_compensated_f64_f64, 1024, false)              \
    X(mta_copy_scale_compensated_f64_f32, 1024, false)              \
    X(mta_add_scale_bf16_f32, 1024, false)                          \
    X(mta_cast_add_scale_bf16_f16, 1024, false)                     \
    X(mta_cast_add_scale_bf16_bf16, 1024, false)                    \
    X(mta_copy_scale_bf16_f32, 1024, false)                         \
    X(mta_copy_scale_bf16_f16, 1024, false)                         \
    X(mta_copy_scale_bf16_bf16, 1024, false)                        \
    X(mta_add_scale_stochastic_bf16_f32, 1024, false)               \
    X(mta_cast_add_scale_stochastic_bf16_f16, 1024, false)          \
    X(mta_cast_add_scale_stochastic_bf16_bf16, 1024, false)         \
    X(mta_copy_scale_stochastic_bf16_f32, 1024, false)              \
    X(mta_copy_scale_stochastic_bf16_f16, 1024, false)              \
    X(mta_copy_scale_stochastic_bf16_bf16, 1024, false)             \
    X(mta_multi_add_scale, MTA_MT_BLOCK, false)                     \
    X(mta_multi_copy_scale, MTA_MT_BLOCK, false)                    \
    X(mta_multi_add_scale_compensated, MTA_MT_BLOCK, false)         \
    X(mta_multi_copy_scale_compensated, MTA_MT_BLOCK, false)        \
    X(mta_multi_add_scale_stochastic, MTA_MT_BLOCK, false)          \
    X(mta_multi_copy_scale_stochastic, MTA_MT_BLOCK, false)

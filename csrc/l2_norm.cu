// Global L2 norm of a list of arrays, for clipping by global norm, in two
// passes: one block per chunk writes a partial sum of squares and a partial
// max |x|, then one block adds the sums and takes the max of the maxima. The
// host takes the square root.
//
// Precision: every square and sum is fp64, whatever the array's dtype. fp64
// squares of fp32/fp16/bf16 values can neither overflow nor underflow, so one
// launch pair gives their norm right to rounding. For fp64 arrays whose squares
// do (|x| above ~1e154 or below ~1e-154) the host launches the pair again with
// scale = 2^-e, e the exponent of the max (an exact scaling), and multiplies
// the root by 2^e (minitorch_accum/kernels/l2_scaling.py decides).
#include "accum_math.cuh"
#include "kernel_loops.cuh"
#include "multi_tensor.cuh"

// Exact: every stored dtype widens to fp64 without rounding.
template <class T>
__device__ __forceinline__ double mta_as_double(T x) {
    return mta_widen<double>(mta_widen<float>(x));
}
template <>
__device__ __forceinline__ double mta_as_double(double x) {
    return x;
}

template <class T>
struct MtaSumSquaresOp {
    const T* x;
    double scale;
    double sum;
    double max;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        const MtaPack<W, T> p = mta_load<W>(x + i);
        MTA_UNROLL
        for (int k = 0; k < W; ++k) {
            const double v = mta_mul(mta_as_double(p.v[k]), scale);
            sum = mta_add(sum, mta_mul(v, v));
            max = mta_max_magnitude(max, v);
        }
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(x);
    }
};

template <class T>
__device__ __forceinline__ void mta_chunk_sum_squares(const T* x, mta_u64 n, double scale, double& sum,
                                                      double& max) {
    MtaSumSquaresOp<T> op{x, scale, 0.0, 0.0};
    mta_block_apply<16 / sizeof(T)>(op, n);
    sum = op.sum;
    max = op.max;
}

// multi_l2_norm pass 1: sums[b] = sum of (scale * x)^2 and maxima[b] = max |scale * x| over block b's chunk
// (4 B/elem fp32; 2 from fp16/bf16, 8 from fp64)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_l2_norm_partials(const __grid_constant__ MtaTensorTable<1> table, double scale, double* sums,
                               double* maxima) {
    const MtaChunk c = mta_block_chunk(table);
    double s = 0.0;
    double m = 0.0;
    switch (table.kinds[c.tensor]) {
        case MTA_DTYPE_F32:
            mta_chunk_sum_squares(mta_table_array<const float>(table, 0, c), c.length, scale, s, m);
            break;
        case MTA_DTYPE_F16:
            mta_chunk_sum_squares(mta_table_array<const mta_half>(table, 0, c), c.length, scale, s, m);
            break;
        case MTA_DTYPE_BF16:
            mta_chunk_sum_squares(mta_table_array<const mta_bfloat16>(table, 0, c), c.length, scale, s, m);
            break;
        case MTA_DTYPE_F64:
            mta_chunk_sum_squares(mta_table_array<const double>(table, 0, c), c.length, scale, s, m);
            break;
        default:
            break;
    }
    mta_block_sum_max(s, m);
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = s;
        maxima[blockIdx.x] = m;
    }
}

// l2_norm_finalize pass 2: out[0] = sum of n sums, out[1] = max of n maxima, launched as one block
// (16 B per partial)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_l2_norm_finalize(const double* sums, const double* maxima, mta_u64 n, double* out) {
    double s = 0.0;
    double m = 0.0;
    for (mta_u64 i = threadIdx.x; i < n; i += blockDim.x) {
        s = mta_add(s, sums[i]);
        m = mta_max_magnitude(m, maxima[i]);
    }
    mta_block_sum_max(s, m);
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = s;
        out[1] = m;
    }
}

#define MTA_L2_NORM_KERNELS(X)                          \
    X(mta_multi_l2_norm_partials, MTA_MT_BLOCK, true)   \
    X(mta_l2_norm_finalize, MTA_MT_BLOCK, true)

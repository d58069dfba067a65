// Global L2 norm of a list of arrays, for clipping by global norm, in two
// passes: one block per chunk writes a partial sum of squares, then one block
// adds the partials. The host takes the square root.
//
// Precision: each thread sums its squares in fp32 (fp64 for fp64 arrays), as
// apex does; the block tree, the partials and the final sum are fp64, so the
// only fp32 sums are over at most MTA_CHUNK_SIZE / blockDim elements.
#include "accum_math.cuh"
#include "kernel_loops.cuh"
#include "multi_tensor.cuh"

template <class T>
struct MtaSquareSumType {
    typedef float type;
};
template <>
struct MtaSquareSumType<double> {
    typedef double type;
};

template <class T>
struct MtaSumSquaresOp {
    typedef typename MtaSquareSumType<T>::type S;
    const T* x;
    S sum;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        const MtaPack<W, T> p = mta_load<W>(x + i);
        MTA_UNROLL
        for (int k = 0; k < W; ++k) {
            const S v = mta_widen<S>(p.v[k]);
            sum = mta_add(sum, mta_mul(v, v));
        }
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(x);
    }
};

template <class T>
__device__ __forceinline__ double mta_chunk_sum_squares(const T* x, mta_u64 n) {
    MtaSumSquaresOp<T> op{x, 0};
    mta_block_apply<16 / sizeof(T)>(op, n);
    return mta_widen<double>(op.sum);
}

// multi_l2_norm pass 1: partials[b] = sum of x^2 over block b's chunk (4 B/elem fp32; 2 from fp16/bf16)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_multi_l2_norm_partials(const __grid_constant__ MtaTensorTable<1> table, double* partials) {
    const MtaChunk c = mta_block_chunk(table);
    double s = 0.0;
    switch (table.kinds[c.tensor]) {
        case MTA_DTYPE_F32:
            s = mta_chunk_sum_squares(mta_table_array<const float>(table, 0, c), c.length);
            break;
        case MTA_DTYPE_F16:
            s = mta_chunk_sum_squares(mta_table_array<const mta_half>(table, 0, c), c.length);
            break;
        case MTA_DTYPE_BF16:
            s = mta_chunk_sum_squares(mta_table_array<const mta_bfloat16>(table, 0, c), c.length);
            break;
        case MTA_DTYPE_F64:
            s = mta_chunk_sum_squares(mta_table_array<const double>(table, 0, c), c.length);
            break;
        default:
            break;
    }
    const double total = mta_block_sum(s);
    if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// l2_norm_finalize pass 2: out[0] = sum of n partials, launched as one block (8 B per partial)
extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)
    mta_l2_norm_finalize(const double* partials, mta_u64 n, double* out) {
    double s = 0.0;
    for (mta_u64 i = threadIdx.x; i < n; i += blockDim.x) s = mta_add(s, partials[i]);
    const double total = mta_block_sum(s);
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = total;
}

#define MTA_L2_NORM_KERNELS(X)                          \
    X(mta_multi_l2_norm_partials, MTA_MT_BLOCK, true)   \
    X(mta_l2_norm_finalize, MTA_MT_BLOCK, true)

// Loop drivers shared by the __global__ kernels: packed (16-byte) loads when
// every pointer allows them, a scalar tail otherwise, 64-bit indices throughout.
//
// A kernel is written as an "op": a small struct holding its pointers and
// scalars, with `template <int W> void apply(mta_u64 i)` that handles elements
// [i, i + W) and `template <int W> bool vectorizable()` that says whether all
// its pointers are aligned for W-element packs. The drivers below decide which
// elements each thread visits; the op decides what happens to them.
#pragma once

#include "accum_math.cuh"
#include "multi_tensor.cuh"

template <int W, class T>
struct alignas(W * sizeof(T)) MtaPack {
    T v[W];
};

template <int W, class T>
__device__ __forceinline__ MtaPack<W, T> mta_load(const T* p) {
    return *reinterpret_cast<const MtaPack<W, T>*>(p);
}

template <int W, class T>
__device__ __forceinline__ void mta_store(T* p, const MtaPack<W, T>& x) {
    *reinterpret_cast<MtaPack<W, T>*>(p) = x;
}

// A null pointer counts as aligned: ops skip the arrays they do not use.
template <int W, class T>
__device__ __forceinline__ bool mta_pack_aligned(const T* p) {
    return ((mta_u64)p % (W * sizeof(T))) == 0;
}

// Thread `first` of `stride` cooperating threads visits packs first,
// first + stride, ... (consecutive threads touch consecutive packs, so loads
// coalesce), then the scalar tail the packs left, in the same order. With
// vectorize false the whole range is the tail.
template <int W, class Op>
__device__ __forceinline__ void mta_strided_apply(Op& op, mta_u64 n, mta_u64 first, mta_u64 stride,
                                                  bool vectorize) {
    mta_u64 tail = 0;
    if (vectorize) {
        const mta_u64 packs = n / W;
        for (mta_u64 k = first; k < packs; k += stride) op.template apply<W>(k * W);
        tail = packs * W;
    }
    for (mta_u64 i = tail + first; i < n; i += stride) op.template apply<1>(i);
}

// Grid-stride over a whole array: any grid covers every element.
template <int W, class Op>
__device__ __forceinline__ void mta_grid_stride_apply(Op& op, mta_u64 n) {
    const mta_u64 first = (mta_u64)blockIdx.x * blockDim.x + threadIdx.x;
    const mta_u64 stride = (mta_u64)gridDim.x * blockDim.x;
    mta_strided_apply<W>(op, n, first, stride, op.template vectorizable<W>());
}

// The chunk of one multi-tensor block: tensor slot, first element, length.
struct MtaChunk {
    int tensor;
    mta_u64 begin;
    mta_u64 length;
};

template <int DEPTH>
__device__ __forceinline__ MtaChunk mta_block_chunk(const MtaTensorTable<DEPTH>& table) {
    MtaChunk c;
    c.tensor = table.block_to_tensor[blockIdx.x];
    c.begin = (mta_u64)table.block_to_chunk[blockIdx.x] * MTA_CHUNK_SIZE;
    const mta_u64 size = (mta_u64)table.sizes[c.tensor];
    c.length = size - c.begin < (mta_u64)MTA_CHUNK_SIZE ? size - c.begin : (mta_u64)MTA_CHUNK_SIZE;
    return c;
}

template <class T, int DEPTH>
__device__ __forceinline__ T* mta_table_array(const MtaTensorTable<DEPTH>& table, int row,
                                              const MtaChunk& c) {
    const mta_u64 address = table.addresses[row][c.tensor];
    return address ? reinterpret_cast<T*>(address) + c.begin : nullptr;
}

// A block's threads walk its chunk together; chunks start at multiples of
// MTA_CHUNK_SIZE elements, so a chunk keeps its tensor's alignment.
template <int W, class Op>
__device__ __forceinline__ void mta_block_apply(Op& op, mta_u64 n) {
    mta_strided_apply<W>(op, n, threadIdx.x, blockDim.x, op.template vectorizable<W>());
}

// The sum of `sum` and the largest `max` over the block's threads, through
// shared memory and __syncthreads only (no warp shuffles, so the CPU emulator
// runs it as written). Works for any block size up to MTA_MT_BLOCK; the
// results are valid in every thread.
__device__ __forceinline__ void mta_block_sum_max(double& sum, double& max) {
    __shared__ double sums[MTA_MT_BLOCK];
    __shared__ double maxima[MTA_MT_BLOCK];
    const unsigned t = threadIdx.x;
    const unsigned n = blockDim.x;
    sums[t] = sum;
    maxima[t] = max;
    __syncthreads();
    unsigned half = 1;
    while (half * 2 < n) half *= 2;
    for (unsigned s = n > 1 ? half : 0; s > 0; s >>= 1) {
        if (t < s && t + s < n) {
            sums[t] = mta_add(sums[t], sums[t + s]);
            maxima[t] = mta_max_magnitude(maxima[t], maxima[t + s]);
        }
        __syncthreads();
    }
    sum = sums[0];
    max = maxima[0];
    // A second call in the same kernel must not overwrite element 0 early.
    __syncthreads();
}

// Loop drivers of the fused row kernels (LayerNorm, cross entropy): a block of
// MTA_ROW_LANES x MTA_ROWS_PER_BLOCK threads gives each row 32 lanes; lane l adds a
// row's elements l, l + 32, ... in order, and the block combines the lanes of each row
// in the order of fused_math.cuh (lane l + w into lane l, w = 16 ... 1) through shared
// memory and __syncthreads only, so the CPU emulator runs them as written.
#pragma once

#include "fused_math.cuh"

#define MTA_ROWS_PER_BLOCK 8

// ``combine`` of v over the 32 lanes of this thread's row, as a tree, in v's type; every thread
// of the block calls it (a shared array per instantiation).
template <class T, class Combine>
__device__ __forceinline__ T mta_row_lanes_reduce(T v, Combine combine) {
    __shared__ T lanes[MTA_ROWS_PER_BLOCK][MTA_ROW_LANES];
    const unsigned lane = threadIdx.x;
    const unsigned slot = threadIdx.y;
    lanes[slot][lane] = v;
    __syncthreads();
    for (unsigned w = MTA_ROW_LANES / 2; w > 0; w >>= 1) {
        if (lane < w) lanes[slot][lane] = combine(lanes[slot][lane], lanes[slot][lane + w]);
        __syncthreads();
    }
    const T r = lanes[slot][0];
    __syncthreads();  // a second call must not overwrite lane 0 before every thread read it
    return r;
}

struct MtaLanesAdd {
    template <class T>
    __device__ __forceinline__ T operator()(T a, T b) const { return mta_add(a, b); }
};

struct MtaLanesMax {
    template <class T>
    __device__ __forceinline__ T operator()(T a, T b) const { return mta_running_max(a, b); }
};

// The sum of v over the 32 lanes of this thread's row.
template <class T>
__device__ __forceinline__ T mta_row_lanes_sum(T v) { return mta_row_lanes_reduce(v, MtaLanesAdd{}); }

// The largest v over the 32 lanes of this thread's row (NaN skipped).
template <class T>
__device__ __forceinline__ T mta_row_lanes_max(T v) { return mta_row_lanes_reduce(v, MtaLanesMax{}); }

// The first row of this block's slot in each round and the stride between rounds: every
// thread of a block runs the same rounds (the barriers need it); a row past the end is idle.
__device__ __forceinline__ mta_u64 mta_row_round_first() { return (mta_u64)blockIdx.x * blockDim.y; }
__device__ __forceinline__ mta_u64 mta_row_round_stride() { return (mta_u64)gridDim.x * blockDim.y; }

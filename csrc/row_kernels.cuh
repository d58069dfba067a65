// Loop drivers of the fused row kernels (LayerNorm, cross entropy): a block of
// MTA_ROW_LANES x MTA_ROWS_PER_BLOCK threads gives each row 32 lanes; lane l adds a
// row's elements l, l + 32, ... in order, and the block combines the lanes of each row
// in the order of fused_math.cuh (lane l + w into lane l, w = 16 ... 1) through shared
// memory and __syncthreads only, so the CPU emulator runs them as written.
#pragma once

#include "fused_math.cuh"

#define MTA_ROWS_PER_BLOCK 8

// ``combine`` of v over the 32 lanes of this thread's row, as a tree; every thread of the block
// calls it (a shared array per instantiation).
template <class Combine>
__device__ __forceinline__ double mta_row_lanes_reduce(double v, Combine combine) {
    __shared__ double lanes[MTA_ROWS_PER_BLOCK][MTA_ROW_LANES];
    const unsigned lane = threadIdx.x;
    const unsigned slot = threadIdx.y;
    lanes[slot][lane] = v;
    __syncthreads();
    for (unsigned w = MTA_ROW_LANES / 2; w > 0; w >>= 1) {
        if (lane < w) lanes[slot][lane] = combine(lanes[slot][lane], lanes[slot][lane + w]);
        __syncthreads();
    }
    const double r = lanes[slot][0];
    __syncthreads();  // a second call must not overwrite lane 0 before every thread read it
    return r;
}

struct MtaLanesAdd {
    __device__ __forceinline__ double operator()(double a, double b) const { return mta_add(a, b); }
};

struct MtaLanesMax {
    __device__ __forceinline__ double operator()(double a, double b) const { return mta_running_max(a, b); }
};

// The sum of v over the 32 lanes of this thread's row.
__device__ __forceinline__ double mta_row_lanes_sum(double v) { return mta_row_lanes_reduce(v, MtaLanesAdd{}); }

// The largest v over the 32 lanes of this thread's row (NaN skipped).
__device__ __forceinline__ double mta_row_lanes_max(double v) { return mta_row_lanes_reduce(v, MtaLanesMax{}); }

// The first row of this block's slot in each round and the stride between rounds: every
// thread of a block runs the same rounds (the barriers need it); a row past the end is idle.
__device__ __forceinline__ mta_u64 mta_row_round_first() { return (mta_u64)blockIdx.x * blockDim.y; }
__device__ __forceinline__ mta_u64 mta_row_round_stride() { return (mta_u64)gridDim.x * blockDim.y; }

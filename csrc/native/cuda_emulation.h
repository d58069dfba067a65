// Shims that let the host C++ compiler build the CUDA sources unchanged, so the
// CPU launch emulator (emulator.cpp) runs the exact __global__ kernels.
//
// Execution model the shims rely on: launches are serialized by a mutex and
// run on one OS thread; blocks run one at a time, so a function-local static
// is a correct per-block __shared__ array; blockIdx/threadIdx/... are globals
// the emulator sets before it runs (or resumes) each GPU thread; and
// __syncthreads() is a real barrier: each GPU thread of a block that
// synchronizes is a fiber, and the barrier switches to the next fiber.
#pragma once

#include <stdexcept>

namespace minitorch_accum::emulator {

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

// The barrier of the block being run; defined in emulator.cpp and never
// inlined, so kernels re-read threadIdx after it.
void sync_threads();

}  // namespace minitorch_accum::emulator

extern minitorch_accum::emulator::Dim3 threadIdx;
extern minitorch_accum::emulator::Dim3 blockIdx;
extern minitorch_accum::emulator::Dim3 blockDim;
extern minitorch_accum::emulator::Dim3 gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
#define __shared__ static
#define __syncthreads() ::minitorch_accum::emulator::sync_threads()

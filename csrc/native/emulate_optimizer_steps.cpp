// The kernels of csrc/optimizer_steps.cu, compiled unchanged for the CPU launch emulator.
// pybind11 comes before the shims, which redefine CUDA keywords as macros.
#include "native/emulator.h"

#include "native/cuda_emulation.h"

#include "optimizer_steps.cu"

namespace minitorch_accum::emulator {

void register_optimizer_kernels() { MTA_OPTIMIZER_KERNELS(MTA_REGISTER_KERNEL) }

}  // namespace minitorch_accum::emulator

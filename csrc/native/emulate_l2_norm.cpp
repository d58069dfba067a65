// The kernels of csrc/l2_norm.cu, compiled unchanged for the CPU launch emulator.
// pybind11 comes before the shims, which redefine CUDA keywords as macros.
#include "native/emulator.h"

#include "native/cuda_emulation.h"

#include "l2_norm.cu"

namespace minitorch_accum::emulator {

void register_l2_norm_kernels() { MTA_L2_NORM_KERNELS(MTA_REGISTER_KERNEL) }

}  // namespace minitorch_accum::emulator

// The kernels of csrc/accumulate.cu, compiled unchanged for the CPU launch emulator.
// pybind11 comes before the shims, which redefine CUDA keywords as macros.
#include "native/emulator.h"

#include "native/cuda_emulation.h"

#include "accumulate.cu"

namespace minitorch_accum::emulator {

void register_accumulate_kernels() { MTA_ACCUMULATE_KERNELS(MTA_REGISTER_KERNEL) }

}  // namespace minitorch_accum::emulator

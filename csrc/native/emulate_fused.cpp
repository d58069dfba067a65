// The kernels of csrc/gelu.cu, layer_norm.cu, cross_entropy.cu, embedding.cu and softmax.cu, compiled
// unchanged for the CPU launch emulator. pybind11 comes before the shims, which redefine
// CUDA keywords as macros.
#include "native/emulator.h"

#include "native/cuda_emulation.h"

#include "cross_entropy.cu"
#include "embedding.cu"
#include "gelu.cu"
#include "layer_norm.cu"
#include "softmax.cu"

namespace minitorch_accum::emulator {

void register_fused_kernels() {
    MTA_GELU_KERNELS(MTA_REGISTER_KERNEL)
    MTA_LAYER_NORM_KERNELS(MTA_REGISTER_KERNEL)
    MTA_CROSS_ENTROPY_KERNELS(MTA_REGISTER_KERNEL)
    MTA_EMBEDDING_KERNELS(MTA_REGISTER_KERNEL)
    MTA_SOFTMAX_KERNELS(MTA_REGISTER_KERNEL)
}

}  // namespace minitorch_accum::emulator

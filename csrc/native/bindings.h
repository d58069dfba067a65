// The pieces of the `_native` module, one per source file.
#pragma once

#include <pybind11/pybind11.h>

namespace minitorch_accum {

void bind_accumulate(pybind11::module_& m);
void bind_l2_norm(pybind11::module_& m);
void bind_optimizer_steps(pybind11::module_& m);
void bind_gelu(pybind11::module_& m);
void bind_layer_norm(pybind11::module_& m);
void bind_cross_entropy(pybind11::module_& m);
void bind_embedding(pybind11::module_& m);
void bind_softmax(pybind11::module_& m);
void bind_gemm(pybind11::module_& m);
void bind_layout(pybind11::module_& m);
void bind_environment(pybind11::module_& m);
void bind_memory_counter(pybind11::module_& m);

namespace emulator {
void bind(pybind11::module_& m);
}

}  // namespace minitorch_accum

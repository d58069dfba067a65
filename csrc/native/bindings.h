// The pieces of the `_native` module, one per source file.
#pragma once

#include <pybind11/pybind11.h>

// Each piece's bind_<name>, in the order the module binds them: declared here and called by
// module.cpp from this one list.
#define MTA_NATIVE_PIECES(X) \
    X(accumulate) \
    X(l2_norm) \
    X(optimizer_steps) \
    X(gelu) \
    X(layer_norm) \
    X(cross_entropy) \
    X(embedding) \
    X(softmax) \
    X(gemm) \
    X(row_vector) \
    X(layout) \
    X(environment) \
    X(memory_counter)

namespace minitorch_accum {

#define MTA_DECLARE_BIND(name) void bind_##name(pybind11::module_& m);
MTA_NATIVE_PIECES(MTA_DECLARE_BIND)
#undef MTA_DECLARE_BIND

namespace emulator {
void bind(pybind11::module_& m);
}

}  // namespace minitorch_accum

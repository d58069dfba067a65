// Argument checks of the fused layer kernels, in the order and with the messages of
// kernels/fused_checks.py: arrays (TypeError), dtypes (TypeError), layouts, shapes
// (ValueError), overlaps of written arrays (ValueError).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "native/array_args.h"

namespace minitorch_accum {

struct FusedArg {
    const char* role;
    py::handle value;
    bool written;
};

class FusedArgs {
public:
    // floats: the roles of the call's float dtype, the first setting it; float64 and int64:
    // roles of that fixed dtype; optional: roles that may be None.
    FusedArgs(const char* kernel, std::initializer_list<FusedArg> args, std::initializer_list<const char*> floats,
              std::initializer_list<const char*> float64 = {}, std::initializer_list<const char*> int64 = {},
              std::initializer_list<const char*> optional = {});

    bool has(const char* role) const { return find(role) != nullptr; }
    // The array of a present role.
    const py::array& operator[](const char* role) const;
    // Its data, or nullptr for a role left out.
    const void* data(const char* role) const;
    void* mutable_data(const char* role) const;
    // The call's float dtype (f32 or f64).
    Dtype dtype() const { return dtype_; }

    void axes(const char* role, int ndim) const;
    void shape(const char* role, const std::vector<py::ssize_t>& shape, const char* like) const;
    void disjoint() const { calls_.require_disjoint(); }

private:
    struct Entry {
        const char* role;
        py::array array;
    };
    const Entry* find(const char* role) const;

    const char* kernel_;
    CallArrays calls_;
    std::vector<Entry> present_;
    Dtype dtype_ = Dtype::other;
};

// ValueError naming the first target that is neither a class index nor ignore_index.
void check_targets(const char* kernel, const std::int64_t* targets, std::int64_t n, std::int64_t classes,
                   std::int64_t ignore_index);

// ValueError naming the first id outside [0, rows).
void check_ids(const char* kernel, const std::int64_t* ids, std::int64_t n, std::int64_t rows);

}  // namespace minitorch_accum

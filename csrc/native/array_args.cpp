#include "native/array_args.h"

#include "multi_tensor.cuh"

namespace minitorch_accum {

namespace {

// ml_dtypes registers bfloat16 with NumPy at run time, so its type number is
// looked up once rather than known at compile time.
int bfloat16_type_number() {
    static const int number = [] {
        py::object bf16 = py::module_::import("ml_dtypes").attr("bfloat16");
        return py::dtype::from_args(bf16).num();
    }();
    return number;
}

std::string shape_of(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t d = 0; d < a.ndim(); ++d) {
        if (d) s += ", ";
        s += std::to_string(a.shape(d));
    }
    if (a.ndim() == 1) s += ",";
    return s + ")";
}

}  // namespace

[[noreturn]] void raise_type_error(const std::string& message) { throw py::type_error(message); }

[[noreturn]] void raise_value_error(const std::string& message) { throw py::value_error(message); }

Dtype dtype_of(const py::array& a) {
    const int num = a.dtype().num();
    if (num == py::detail::npy_api::NPY_FLOAT_) return Dtype::f32;
    if (num == py::detail::npy_api::NPY_DOUBLE_) return Dtype::f64;
    if (num == 23 /* NPY_HALF */) return Dtype::f16;
    if (a.itemsize() == 2 && num == bfloat16_type_number()) return Dtype::bf16;
    return Dtype::other;
}

std::string describe(const std::string& role, const py::array& a) {
    return role + " (shape " + shape_of(a) + ", " + std::string(py::str(a.dtype())) + ")";
}

py::array require_array(py::handle h, const char* kernel, const std::string& role) {
    if (!py::isinstance<py::array>(h)) {
        raise_type_error(std::string(kernel) + ": " + role + " must be a NumPy array, got " +
                         std::string(py::str(py::type::of(h).attr("__qualname__"))));
    }
    return py::reinterpret_borrow<py::array>(h);
}

void require_contiguous(const py::array& a, const char* kernel, const std::string& role, bool written) {
    if (!(a.flags() & py::array::c_style)) {
        raise_value_error(std::string(kernel) + ": " + describe(role, a) + " must be C-contiguous");
    }
    if (written && !a.writeable()) {
        raise_value_error(std::string(kernel) + ": " + describe(role, a) + " is read-only");
    }
}

void require_same_size(const py::array& a, const std::string& a_role, const py::array& b,
                       const std::string& b_role, const char* kernel) {
    if (a.size() != b.size()) {
        raise_value_error(std::string(kernel) + ": " + describe(a_role, a) + " and " + describe(b_role, b) +
                          " must have the same number of elements");
    }
}

int* flag_pointer(py::handle flag, const char* kernel) {
    if (flag.is_none()) return nullptr;
    py::array f = require_array(flag, kernel, "flag");
    if (f.dtype().num() != py::detail::npy_api::NPY_INT_ || f.size() < 1) {
        raise_type_error(std::string(kernel) + ": " + describe("flag", f) +
                         " must be an int32 array of shape (1,) (see new_flag)");
    }
    require_contiguous(f, kernel, "flag", true);
    return static_cast<int*>(f.mutable_data());
}

int accumulate_kind(const py::array& acc, const std::string& acc_role, const py::array& g,
                    const std::string& g_role, const char* kernel) {
    const Dtype a = dtype_of(acc);
    const Dtype b = dtype_of(g);
    if (a == Dtype::f32) {
        if (b == Dtype::f32) return MTA_KIND_F32_F32;
        if (b == Dtype::f16) return MTA_KIND_F32_F16;
        if (b == Dtype::bf16) return MTA_KIND_F32_BF16;
    } else if (a == Dtype::f64) {
        if (b == Dtype::f64) return MTA_KIND_F64_F64;
        if (b == Dtype::f32) return MTA_KIND_F64_F32;
    }
    raise_type_error(std::string(kernel) + ": unsupported dtypes " + describe(acc_role, acc) + " with " +
                     describe(g_role, g) +
                     "; supported (acc, g) pairs: (float32, float32), (float32, float16), "
                     "(float32, bfloat16), (float64, float64), (float64, float32)");
}

py::sequence require_list(py::handle h, const char* kernel, const char* role) {
    if (!py::isinstance<py::list>(h) && !py::isinstance<py::tuple>(h)) {
        raise_type_error(std::string(kernel) + ": " + role + " must be a list or tuple of arrays, got " +
                         std::string(py::str(py::type::of(h).attr("__qualname__"))));
    }
    return py::reinterpret_borrow<py::sequence>(h);
}

}  // namespace minitorch_accum

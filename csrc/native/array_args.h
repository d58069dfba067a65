// Argument checks of the native kernels: every error names the kernel, the
// argument, its shape and its dtype, and is raised as the Python exception the
// NumPy reference path raises for the same mistake (kernels/validation.py).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

namespace minitorch_accum {

namespace py = pybind11;

enum class Dtype { f32, f16, bf16, f64, other };

Dtype dtype_of(const py::array& a);

// "acc (shape (3, 4), float32)"
std::string describe(const std::string& role, const py::array& a);

// The argument as a NumPy array, without copying; TypeError otherwise.
py::array require_array(py::handle h, const char* kernel, const std::string& role);

// ValueError unless C-contiguous (and writeable when the kernel writes it).
void require_contiguous(const py::array& a, const char* kernel, const std::string& role, bool written);

// ValueError unless both hold the same number of elements (shapes may differ).
void require_same_size(const py::array& a, const std::string& a_role, const py::array& b,
                       const std::string& b_role, const char* kernel);

// The flag's int32 cell, or nullptr for None.
int* flag_pointer(py::handle flag, const char* kernel);

// The (accumulator, gradient) pair's MtaKind; TypeError naming the supported pairs.
int accumulate_kind(const py::array& acc, const std::string& acc_role, const py::array& g,
                    const std::string& g_role, const char* kernel);

// A Python list/tuple of arrays; TypeError otherwise.
py::sequence require_list(py::handle h, const char* kernel, const char* role);

[[noreturn]] void raise_type_error(const std::string& message);
[[noreturn]] void raise_value_error(const std::string& message);

inline std::string indexed(const char* role, std::size_t i) {
    return std::string(role) + "[" + std::to_string(i) + "]";
}

}  // namespace minitorch_accum

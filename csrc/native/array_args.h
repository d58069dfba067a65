// Argument checks of the native kernels: every error names the kernel, the
// argument, its shape and its dtype, and is raised as the Python exception the
// NumPy reference path raises for the same mistake, with the same message and
// in the same order of checks (kernels/validation.py).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace minitorch_accum {

namespace py = pybind11;

enum class Dtype { f32, f16, bf16, f64, other };

Dtype dtype_of(const py::array& a);

// An argument's name in messages: "acc", or "accs[3]" for item 3 of a list.
// The text is built only for a message: a call over 100 tensors checks 200
// arrays, and building their names cost as much as the checks.
struct Role {
    const char* name;
    std::ptrdiff_t index = -1;

    Role(const char* role) : name(role) {}  // NOLINT: a plain name converts
    Role(const char* list, std::size_t i) : name(list), index(static_cast<std::ptrdiff_t>(i)) {}
    std::string str() const;
};

// "acc (shape (3, 4), float32)"
std::string describe(const Role& role, const py::array& a);

// The arrays of one call. Each is checked (a NumPy array, in native byte order)
// and held, one reference each, until the call returns: the kernels run with
// the GIL released, and another Python thread may meanwhile drop the caller's
// last reference to a list item (clear the list); a held array's memory
// outlives the kernel. require_disjoint then refuses any array the kernel
// writes that shares memory with another of the call's arrays.
class CallArrays {
public:
    explicit CallArrays(const char* kernel) : kernel_(kernel) {}

    const char* kernel() const { return kernel_; }

    // TypeError unless h is a NumPy array in native byte order; `written`: the kernel writes it.
    py::array add(py::handle h, Role role, bool written);

    // ValueError naming both arrays when a written array overlaps another one.
    void require_disjoint() const;

private:
    struct Entry {
        py::array array;
        Role role;
        bool written;
    };
    const char* kernel_;
    std::vector<Entry> entries_;
};

// ValueError unless C-contiguous (and writeable when the kernel writes it).
void require_contiguous(const py::array& a, const char* kernel, const Role& role, bool written);

// ValueError unless both hold the same number of elements (shapes may differ).
void require_same_size(const py::array& a, const Role& a_role, const py::array& b, const Role& b_role,
                       const char* kernel);

// The flag's int32 cell (the flag held by `arrays`), or nullptr for None.
int* flag_pointer(CallArrays& arrays, py::handle flag);

// The (accumulator, gradient) pair's MtaKind; TypeError naming the supported pairs. A
// bfloat16 accumulator is one only where `bfloat16_acc` (not in the compensated kernels).
int accumulate_kind(const py::array& acc, const Role& acc_role, const py::array& g, const Role& g_role,
                    const char* kernel, bool bfloat16_acc);

// A Python list/tuple of arrays; TypeError otherwise.
py::sequence require_list(py::handle h, const char* kernel, const std::string& role);

// The lists of a multi-tensor call, each checked by require_list; ValueError
// naming every list and its length unless all have the first one's length.
std::vector<py::sequence> require_lists(const char* kernel,
                                        const std::vector<std::pair<std::string, py::handle>>& named);

[[noreturn]] void raise_type_error(const std::string& message);
[[noreturn]] void raise_value_error(const std::string& message);

}  // namespace minitorch_accum

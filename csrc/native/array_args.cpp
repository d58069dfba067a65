#include "native/array_args.h"

#include <algorithm>

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

std::string Role::str() const {
    return index < 0 ? std::string(name) : std::string(name) + "[" + std::to_string(index) + "]";
}

std::string describe(const Role& role, const py::array& a) {
    return role.str() + " (shape " + shape_of(a) + ", " + std::string(py::str(a.dtype())) + ")";
}

namespace {

bool native_byte_order(const py::array& a) {
    const char order = a.dtype().byteorder();
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return order != '<';
#else
    return order != '>';
#endif
}

std::string type_name(py::handle h) { return std::string(py::str(py::type::of(h).attr("__qualname__"))); }

}  // namespace

py::array CallArrays::add(py::handle h, Role role, bool written) {
    if (!py::isinstance<py::array>(h)) {
        raise_type_error(std::string(kernel_) + ": " + role.str() + " must be a NumPy or CuPy array, got " +
                         type_name(h));
    }
    auto a = py::reinterpret_borrow<py::array>(h);
    if (!native_byte_order(a)) {
        raise_type_error(std::string(kernel_) + ": " + describe(role, a) + " must be in native byte order");
    }
    entries_.push_back(Entry{a, role, written});
    return a;
}

// Sorted by first byte (then by argument order), a span overlaps an earlier one
// exactly when it starts before the farthest end seen so far; keeping that end
// for written arrays and for all arrays finds every overlap that involves a
// written array, and names the same pair as kernels/validation.py does.
void CallArrays::require_disjoint() const {
    struct Span {
        std::uintptr_t begin, end;
        std::size_t index;
    };
    std::vector<Span> spans;
    spans.reserve(entries_.size());
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        const py::array& a = entries_[i].array;
        if (a.nbytes() == 0) continue;
        // the bytes the strides reach, not nbytes from the first: a broadcast view (stride 0) reaches
        // fewer, a strided or negatively strided one more, or some before its first element
        std::intptr_t low = 0, high = 0;
        for (py::ssize_t axis = 0; axis < a.ndim(); ++axis) {
            const std::intptr_t reach = static_cast<std::intptr_t>(a.shape(axis) - 1) * a.strides(axis);
            (reach < 0 ? low : high) += reach;
        }
        const auto first = reinterpret_cast<std::uintptr_t>(a.data());
        spans.push_back(Span{first + static_cast<std::uintptr_t>(low),
                             first + static_cast<std::uintptr_t>(high + a.itemsize()), i});
    }
    std::sort(spans.begin(), spans.end(),
              [](const Span& x, const Span& y) { return x.begin != y.begin ? x.begin < y.begin : x.index < y.index; });
    const Span* farthest_written = nullptr;
    const Span* farthest = nullptr;
    for (const Span& s : spans) {
        const Span* other = nullptr;
        if (farthest_written != nullptr && s.begin < farthest_written->end) {
            other = farthest_written;
        } else if (entries_[s.index].written && farthest != nullptr && s.begin < farthest->end) {
            other = farthest;
        }
        if (other != nullptr) {
            const Entry& first = entries_[std::min(s.index, other->index)];
            const Entry& second = entries_[std::max(s.index, other->index)];
            raise_value_error(std::string(kernel_) + ": " + describe(first.role, first.array) + " and " +
                              describe(second.role, second.array) +
                              " share memory; an array the kernel writes must not overlap its other arrays");
        }
        if (entries_[s.index].written && (farthest_written == nullptr || s.end > farthest_written->end)) {
            farthest_written = &s;
        }
        if (farthest == nullptr || s.end > farthest->end) farthest = &s;
    }
}

void require_contiguous(const py::array& a, const char* kernel, const Role& role, bool written) {
    if (!(a.flags() & py::array::c_style)) {
        raise_value_error(std::string(kernel) + ": " + describe(role, a) + " must be C-contiguous");
    }
    if (written && !a.writeable()) {
        raise_value_error(std::string(kernel) + ": " + describe(role, a) + " is read-only");
    }
}

void require_same_size(const py::array& a, const Role& a_role, const py::array& b, const Role& b_role,
                       const char* kernel) {
    if (a.size() != b.size()) {
        raise_value_error(std::string(kernel) + ": " + describe(a_role, a) + " and " + describe(b_role, b) +
                          " must have the same number of elements");
    }
}

int* flag_pointer(CallArrays& arrays, py::handle flag) {
    if (flag.is_none()) return nullptr;
    const char* kernel = arrays.kernel();
    py::array f = arrays.add(flag, "flag", true);
    if (f.dtype().num() != py::detail::npy_api::NPY_INT_ || f.itemsize() != 4 || f.size() < 1) {
        raise_type_error(std::string(kernel) + ": " + describe("flag", f) +
                         " must be an int32 array of shape (1,) (see new_flag)");
    }
    require_contiguous(f, kernel, "flag", true);
    return static_cast<int*>(f.mutable_data());
}

int accumulate_kind(const py::array& acc, const Role& acc_role, const py::array& g, const Role& g_role,
                    const char* kernel, bool bfloat16_acc) {
    const Dtype a = dtype_of(acc);
    const Dtype b = dtype_of(g);
    if (a == Dtype::f32) {
        if (b == Dtype::f32) return MTA_KIND_F32_F32;
        if (b == Dtype::f16) return MTA_KIND_F32_F16;
        if (b == Dtype::bf16) return MTA_KIND_F32_BF16;
    } else if (a == Dtype::f64) {
        if (b == Dtype::f64) return MTA_KIND_F64_F64;
        if (b == Dtype::f32) return MTA_KIND_F64_F32;
    } else if (a == Dtype::bf16 && bfloat16_acc) {
        if (b == Dtype::f32) return MTA_KIND_BF16_F32;
        if (b == Dtype::f16) return MTA_KIND_BF16_F16;
        if (b == Dtype::bf16) return MTA_KIND_BF16_BF16;
    }
    raise_type_error(std::string(kernel) + ": unsupported dtypes " + describe(acc_role, acc) + " with " +
                     describe(g_role, g) +
                     "; supported (acc, g) pairs: (float32, float32), (float32, float16), "
                     "(float32, bfloat16), (float64, float64), (float64, float32)" +
                     (bfloat16_acc ? ", (bfloat16, float32), (bfloat16, float16), (bfloat16, bfloat16)" : ""));
}

py::sequence require_list(py::handle h, const char* kernel, const std::string& role) {
    if (!py::isinstance<py::list>(h) && !py::isinstance<py::tuple>(h)) {
        raise_type_error(std::string(kernel) + ": " + role + " must be a list or tuple of arrays, got " + type_name(h));
    }
    return py::reinterpret_borrow<py::sequence>(h);
}

std::vector<py::sequence> require_lists(const char* kernel,
                                        const std::vector<std::pair<std::string, py::handle>>& named) {
    std::vector<py::sequence> lists;
    bool same = true;
    for (const auto& [role, h] : named) {
        lists.push_back(require_list(h, kernel, role));
        same = same && lists.back().size() == lists.front().size();
    }
    if (!same) {
        std::string roles, counts;
        for (std::size_t i = 0; i < named.size(); ++i) {
            const char* separator = i == 0 ? "" : (i + 1 == named.size() ? " and " : ", ");
            roles += separator + named[i].first;
            counts += separator + std::to_string(lists[i].size());
        }
        raise_value_error(std::string(kernel) + ": " + roles + " must have the same length, got " + counts);
    }
    return lists;
}

}  // namespace minitorch_accum

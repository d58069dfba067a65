#include "native/fused_args.h"

#include <cstring>
#include <string>

namespace minitorch_accum {

namespace {

bool listed(std::initializer_list<const char*> roles, const char* role) {
    for (const char* r : roles) {
        if (std::strcmp(r, role) == 0) return true;
    }
    return false;
}

bool is_int64(const py::array& a) { return a.dtype().kind() == 'i' && a.itemsize() == 8; }

std::string shape_text(const std::vector<py::ssize_t>& shape) {
    std::string s = "(";
    for (std::size_t d = 0; d < shape.size(); ++d) {
        if (d) s += ", ";
        s += std::to_string(shape[d]);
    }
    if (shape.size() == 1) s += ",";
    return s + ")";
}

}  // namespace

FusedArgs::FusedArgs(const char* kernel, std::initializer_list<FusedArg> args,
                     std::initializer_list<const char*> floats, std::initializer_list<const char*> float64,
                     std::initializer_list<const char*> int64, std::initializer_list<const char*> optional)
    : kernel_(kernel), calls_(kernel) {
    for (const FusedArg& a : args) {
        if (a.value.is_none() && listed(optional, a.role)) continue;
        present_.push_back(Entry{a.role, calls_.add(a.value, a.role, a.written)});
    }
    const char* first = *floats.begin();
    const py::array& x = (*this)[first];
    dtype_ = dtype_of(x);
    if (dtype_ != Dtype::f32 && dtype_ != Dtype::f64) {
        raise_type_error(std::string(kernel) + ": unsupported dtype " + describe(first, x) +
                         "; supported: float32, float64");
    }
    for (const char* role : floats) {
        const Entry* e = find(role);
        if (e != nullptr && std::strcmp(role, first) != 0 && e->array.dtype().num() != x.dtype().num()) {
            raise_type_error(std::string(kernel) + ": " + describe(role, e->array) + " must have the dtype of " +
                             describe(first, x));
        }
    }
    for (const char* role : float64) {
        const Entry* e = find(role);
        if (e != nullptr && dtype_of(e->array) != Dtype::f64) {
            raise_type_error(std::string(kernel) + ": " + describe(role, e->array) + " must be float64");
        }
    }
    for (const char* role : int64) {
        const Entry* e = find(role);
        if (e != nullptr && !is_int64(e->array)) {
            raise_type_error(std::string(kernel) + ": " + describe(role, e->array) + " must be int64");
        }
    }
    for (const FusedArg& a : args) {
        const Entry* e = find(a.role);
        if (e != nullptr) require_contiguous(e->array, kernel, a.role, a.written);
    }
}

const FusedArgs::Entry* FusedArgs::find(const char* role) const {
    for (const Entry& e : present_) {
        if (std::strcmp(e.role, role) == 0) return &e;
    }
    return nullptr;
}

const py::array& FusedArgs::operator[](const char* role) const { return find(role)->array; }

const void* FusedArgs::data(const char* role) const {
    const Entry* e = find(role);
    return e != nullptr ? e->array.data() : nullptr;
}

void* FusedArgs::mutable_data(const char* role) const {
    const Entry* e = find(role);
    return e != nullptr ? const_cast<py::array&>(e->array).mutable_data() : nullptr;
}

void FusedArgs::axes(const char* role, int ndim) const {
    const py::array& a = (*this)[role];
    if (a.ndim() != ndim) {
        raise_value_error(std::string(kernel_) + ": " + describe(role, a) + " must have " + std::to_string(ndim) +
                          (ndim == 1 ? " axis" : " axes"));
    }
}

void FusedArgs::shape(const char* role, const std::vector<py::ssize_t>& shape, const char* like) const {
    const Entry* e = find(role);
    if (e == nullptr) return;
    bool same = e->array.ndim() == static_cast<py::ssize_t>(shape.size());
    for (std::size_t d = 0; same && d < shape.size(); ++d) same = e->array.shape(d) == shape[d];
    if (!same) {
        raise_value_error(std::string(kernel_) + ": " + describe(role, e->array) + " must have shape " +
                          shape_text(shape) + " to match " + describe(like, (*this)[like]));
    }
}

void check_targets(const char* kernel, const std::int64_t* targets, std::int64_t n, std::int64_t classes,
                   std::int64_t ignore_index) {
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t t = targets[i];
        if (t != ignore_index && (t < 0 || t >= classes)) {
            raise_value_error(std::string(kernel) + ": targets[" + std::to_string(i) + "] = " + std::to_string(t) +
                              " is out of range for " + std::to_string(classes) +
                              " classes (ignore_index=" + std::to_string(ignore_index) + ")");
        }
    }
}

void check_ids(const char* kernel, const std::int64_t* ids, std::int64_t n, std::int64_t rows) {
    for (std::int64_t i = 0; i < n; ++i) {
        if (ids[i] < 0 || ids[i] >= rows) {
            raise_value_error(std::string(kernel) + ": ids[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                              " is out of range for " + std::to_string(rows) + " rows");
        }
    }
}

}  // namespace minitorch_accum

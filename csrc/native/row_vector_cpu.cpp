// A row vector broadcast over the rows of a matrix, both ways: a Linear's bias added to each row
// of its product, and the bias's gradient, the sum of the output gradient's rows.
//
// NumPy's `x + b` runs its broadcast loop once per row: 84 us for 1024 rows of 256 float32 here,
// against 50 us for this loop and 37 us for a plain copy of x; `g.sum(axis=0)` 44 us against 18.
// Both give NumPy's bits: one rounding per element for the add; the column sums start from +0
// and add the rows in order, row 0 first, as NumPy's reduction over the leading axes of a
// C-contiguous array does for two columns or more (one column it sums pairwise: the Python side
// leaves that to NumPy). The pool cuts the add by rows and the sums by columns, so no thread
// count changes an element's order.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "native/array_args.h"
#include "native/bindings.h"
#include "native/parallel.h"
#include "native/simd.h"

namespace minitorch_accum {

namespace {

// Columns one task of the sums keeps in registers while it walks every row.
constexpr std::int64_t kSumColumns = 64;

template <class T>
MTA_ALWAYS_INLINE inline void add_rows(const T* __restrict x, const T* __restrict v, T* __restrict out,
                                       std::int64_t begin, std::int64_t end, std::int64_t n) {
    for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict xr = x + r * n;
        T* __restrict yr = out + r * n;
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j) yr[j] = xr[j] + v[j];
    }
}

template <class T>
MTA_ALWAYS_INLINE inline void sum_columns(const T* __restrict g, T* __restrict out, std::int64_t rows,
                                          std::int64_t n, std::int64_t first, std::int64_t last) {
    T acc[kSumColumns];
    const std::int64_t width = last - first;
#pragma omp simd
    for (std::int64_t j = 0; j < width; ++j) acc[j] = T(0) + g[first + j];  // NumPy starts from +0: -0 sums to +0
    for (std::int64_t r = 1; r < rows; ++r) {
        const T* __restrict gr = g + r * n + first;
#pragma omp simd
        for (std::int64_t j = 0; j < width; ++j) acc[j] = acc[j] + gr[j];
    }
#pragma omp simd
    for (std::int64_t j = 0; j < width; ++j) out[first + j] = acc[j];
}

MTA_SIMD_CLONES(add_rows, (class T), (T),
                (const T* x, const T* v, T* out, std::int64_t begin, std::int64_t end, std::int64_t n),
                (x, v, out, begin, end, n))
MTA_SIMD_CLONES(sum_columns, (class T), (T),
                (const T* g, T* out, std::int64_t rows, std::int64_t n, std::int64_t first, std::int64_t last),
                (g, out, rows, n, first, last))

template <class T>
void add_rows_span(const T* x, const T* v, T* out, std::int64_t begin, std::int64_t end, std::int64_t n) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return add_rows_avx512<T>(x, v, out, begin, end, n);
        case SimdLevel::avx2: return add_rows_avx2<T>(x, v, out, begin, end, n);
        default: break;
    }
#endif
    add_rows<T>(x, v, out, begin, end, n);
}

template <class T>
void sum_columns_span(const T* g, T* out, std::int64_t rows, std::int64_t n, std::int64_t first, std::int64_t last) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return sum_columns_avx512<T>(g, out, rows, n, first, last);
        case SimdLevel::avx2: return sum_columns_avx2<T>(g, out, rows, n, first, last);
        default: break;
    }
#endif
    sum_columns<T>(g, out, rows, n, first, last);
}

// The matrix (rows, n) and the vector (n,) of a call: same dtype (float32 or float64), matrix
// C-contiguous with 2 axes.
Dtype check_pair(const char* kernel, const py::array& matrix, const char* matrix_role, const py::array& vector,
                 const char* vector_role) {
    const Dtype dtype = dtype_of(matrix);
    if (dtype != Dtype::f32 && dtype != Dtype::f64) {
        raise_type_error(std::string(kernel) + ": unsupported dtype " + describe(Role(matrix_role), matrix) +
                         "; supported: float32, float64");
    }
    if (dtype_of(vector) != dtype) {
        raise_type_error(std::string(kernel) + ": " + describe(Role(vector_role), vector) +
                         " must have the dtype of " + describe(Role(matrix_role), matrix));
    }
    if (matrix.ndim() != 2) {
        raise_value_error(std::string(kernel) + ": " + describe(Role(matrix_role), matrix) + " must have 2 axes");
    }
    if (vector.ndim() != 1 || vector.shape(0) != matrix.shape(1)) {
        raise_value_error(std::string(kernel) + ": " + describe(Role(vector_role), vector) + " must have shape (" +
                          std::to_string(matrix.shape(1)) + ",), one entry per column of " +
                          describe(Role(matrix_role), matrix));
    }
    return dtype;
}

void add_row_vector(py::handle x_handle, py::handle v_handle, py::handle out_handle) {
    const char* kernel = "add_row_vector";
    CallArrays arrays(kernel);
    const py::array x = arrays.add(x_handle, Role("x"), false);
    const py::array v = arrays.add(v_handle, Role("v"), false);
    const py::array out = arrays.add(out_handle, Role("out"), true);
    const Dtype dtype = check_pair(kernel, x, "x", v, "v");
    if (dtype_of(out) != dtype || out.ndim() != 2 || out.shape(0) != x.shape(0) || out.shape(1) != x.shape(1)) {
        raise_value_error(std::string(kernel) + ": " + describe(Role("out"), out) + " must have the shape and dtype of " +
                          describe(Role("x"), x));
    }
    require_contiguous(x, kernel, Role("x"), false);
    require_contiguous(v, kernel, Role("v"), false);
    require_contiguous(out, kernel, Role("out"), true);
    arrays.require_disjoint();
    const std::int64_t rows = x.shape(0), n = x.shape(1);
    if (rows == 0 || n == 0) return;
    void* y = const_cast<py::array&>(out).mutable_data();
    // tasks of whole rows, about 16K elements each
    const std::int64_t per_task = std::max<std::int64_t>(1, (std::int64_t(1) << 14) / n);
    std::optional<py::gil_scoped_release> nogil;
    if (rows * n >= 4096) nogil.emplace();
    for_each_task((rows + per_task - 1) / per_task, rows * n, [&](std::int64_t t) {
        const std::int64_t begin = t * per_task, end = std::min(rows, begin + per_task);
        if (dtype == Dtype::f32) {
            add_rows_span(static_cast<const float*>(x.data()), static_cast<const float*>(v.data()),
                          static_cast<float*>(y), begin, end, n);
        } else {
            add_rows_span(static_cast<const double*>(x.data()), static_cast<const double*>(v.data()),
                          static_cast<double*>(y), begin, end, n);
        }
        return false;
    });
}

void sum_of_rows(py::handle g_handle, py::handle out_handle) {
    const char* kernel = "sum_rows";
    CallArrays arrays(kernel);
    const py::array g = arrays.add(g_handle, Role("g"), false);
    const py::array out = arrays.add(out_handle, Role("out"), true);
    const Dtype dtype = check_pair(kernel, g, "g", out, "out");
    require_contiguous(g, kernel, Role("g"), false);
    require_contiguous(out, kernel, Role("out"), true);
    arrays.require_disjoint();
    const std::int64_t rows = g.shape(0), n = g.shape(1);
    if (n == 0) return;
    if (rows == 0) raise_value_error(std::string(kernel) + ": " + describe(Role("g"), g) + " has no rows to sum");
    void* y = const_cast<py::array&>(out).mutable_data();
    std::optional<py::gil_scoped_release> nogil;
    if (rows * n >= 4096) nogil.emplace();
    for_each_task((n + kSumColumns - 1) / kSumColumns, rows * n, [&](std::int64_t t) {
        const std::int64_t first = t * kSumColumns, last = std::min(n, first + kSumColumns);
        if (dtype == Dtype::f32) {
            sum_columns_span(static_cast<const float*>(g.data()), static_cast<float*>(y), rows, n, first, last);
        } else {
            sum_columns_span(static_cast<const double*>(g.data()), static_cast<double*>(y), rows, n, first, last);
        }
        return false;
    });
}

}  // namespace

void bind_row_vector(py::module_& m) {
    m.def("add_row_vector", &add_row_vector, py::arg("x"), py::arg("v"), py::arg("out"),
          R"doc(out[r, j] = x[r, j] + v[j] for a 2-D x and a vector v of its columns, bit for bit NumPy's x + v
(8 B/elem fp32).)doc");
    m.def("sum_rows", &sum_of_rows, py::arg("g"), py::arg("out"),
          R"doc(out[j] = g[0, j] + g[1, j] + ... in row order, bit for bit NumPy's g.sum(axis=0) for two columns or
more (4 B/elem fp32).)doc");
}

}  // namespace minitorch_accum

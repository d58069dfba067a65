// Native softmax over the rows of a 2-D array, forward and backward, in the stored dtype
// (float32 rows in float32 SIMD): the row's scores x scale + bias (an attention's causal mask
// is a bias of 0 and -inf, one row of it per query, cycling over the rows), their max, the
// sum of e^(score - max) in the lane order of fused_math.cuh (row_loops.h), then each term
// times 1 / sum. One pass for the backward: (p (g - sum(g p))) scale.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fused_math.cuh"
#include "native/bindings.h"
#include "native/fused_args.h"
#include "native/parallel.h"
#include "native/row_loops.h"
#include "native/simd.h"

namespace minitorch_accum {

namespace {

struct SoftmaxJob {
    const void* x;     // forward: the scores' input; backward: the probabilities
    const void* bias;  // forward: bias_rows x columns, row r adds bias row r % bias_rows (a row of -0 if none)
    const void* grad;  // backward
    void* out;
    std::int64_t rows;
    std::int64_t columns;
    std::int64_t bias_rows;
    double scale;
};

// Up to 64 rows at a time, one pass over them per stage (their shifts, then their exps and
// sums, then the normalization), so that the rows' chains overlap instead of queuing.
template <class T>
MTA_ALWAYS_INLINE inline void softmax_rows(const SoftmaxJob& job, std::int64_t begin, std::int64_t end) {
    const std::int64_t n = job.columns;
    const T scale = MtaNarrow<T>::from(job.scale);
    const auto row = [&](std::int64_t r) { return static_cast<const T*>(job.x) + r * n; };
    const auto bias = [&](std::int64_t r) { return static_cast<const T*>(job.bias) + (r % job.bias_rows) * n; };
    T shift[64];
    T inverse[64];
    for (std::int64_t first = begin; first < end; first += 64) {
        const std::int64_t last = std::min(end, first + 64);
        for (std::int64_t r = first; r < last; ++r) {
            const T* __restrict x = row(r);
            const T* __restrict b = bias(r);
            shift[r - first] =
                mta_softmax_shift(row_lane_max(n, [&](std::int64_t j) { return mta_softmax_score(x[j], scale, b[j]); }));
        }
        for (std::int64_t r = first; r < last; ++r) {
            const T* __restrict x = row(r);
            const T* __restrict b = bias(r);
            T* __restrict y = static_cast<T*>(job.out) + r * n;
            const T s = shift[r - first];
#pragma omp simd
            for (std::int64_t j = 0; j < n; ++j) y[j] = mta_softmax_exp(mta_sub(mta_softmax_score(x[j], scale, b[j]), s));
            inverse[r - first] = mta_div(T(1), row_lane_sum(n, [&](std::int64_t j) { return y[j]; }));
        }
        for (std::int64_t r = first; r < last; ++r) {
            T* __restrict y = static_cast<T*>(job.out) + r * n;
            const T v = inverse[r - first];
#pragma omp simd
            for (std::int64_t j = 0; j < n; ++j) y[j] = mta_mul(y[j], v);
        }
    }
}

template <class T>
MTA_ALWAYS_INLINE inline void softmax_grad_rows(const SoftmaxJob& job, std::int64_t begin, std::int64_t end) {
    const std::int64_t n = job.columns;
    const T scale = MtaNarrow<T>::from(job.scale);
    for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict p = static_cast<const T*>(job.x) + r * n;
        const T* __restrict g = static_cast<const T*>(job.grad) + r * n;
        T* __restrict out = static_cast<T*>(job.out) + r * n;
        const T dot = row_lane_sum(n, [&](std::int64_t j) { return mta_mul(g[j], p[j]); });
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j) out[j] = mta_softmax_grad_element(p[j], g[j], dot, scale);
    }
}

MTA_SIMD_CLONES(softmax_rows, (class T), (T), (const SoftmaxJob& job, std::int64_t begin, std::int64_t end),
                (job, begin, end))
MTA_SIMD_CLONES(softmax_grad_rows, (class T), (T), (const SoftmaxJob& job, std::int64_t begin, std::int64_t end),
                (job, begin, end))

template <class T>
void softmax_span(bool backward, const SoftmaxJob& job, std::int64_t begin, std::int64_t end) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512:
            return backward ? softmax_grad_rows_avx512<T>(job, begin, end) : softmax_rows_avx512<T>(job, begin, end);
        case SimdLevel::avx2:
            return backward ? softmax_grad_rows_avx2<T>(job, begin, end) : softmax_rows_avx2<T>(job, begin, end);
        default: break;
    }
#endif
    return backward ? softmax_grad_rows<T>(job, begin, end) : softmax_rows<T>(job, begin, end);
}

void run_softmax(bool backward, Dtype dtype, const SoftmaxJob& job) {
    const std::int64_t per_task = rows_per_task(job.columns);
    std::optional<py::gil_scoped_release> nogil;
    if (job.rows * job.columns >= 4096) nogil.emplace();
    for_each_task((job.rows + per_task - 1) / per_task, job.rows * job.columns, [&](std::int64_t t) {
        const std::int64_t begin = t * per_task, end = std::min<std::int64_t>(job.rows, begin + per_task);
        if (dtype == Dtype::f32) {
            softmax_span<float>(backward, job, begin, end);
        } else {
            softmax_span<double>(backward, job, begin, end);
        }
        return false;
    });
}

void softmax_forward(py::handle x, py::handle bias, double scale, py::handle out) {
    const char* kernel = "softmax_forward";
    const FusedArgs args(kernel, {{"x", x, false}, {"bias", bias, false}, {"out", out, true}}, {"x", "bias", "out"},
                         {}, {}, {"bias"});
    args.axes("x", 2);
    const py::ssize_t rows = args["x"].shape(0), columns = args["x"].shape(1);
    py::ssize_t bias_rows = 1;
    if (args.has("bias")) {
        args.axes("bias", 2);
        bias_rows = args["bias"].shape(0);
        args.shape("bias", {bias_rows, columns}, "x");
        if (bias_rows == 0 || rows % bias_rows != 0) {
            raise_value_error(std::string(kernel) + ": " + describe("x", args["x"]) + " has " + std::to_string(rows) +
                              " rows, not a multiple of the rows of " + describe("bias", args["bias"]));
        }
    }
    args.shape("out", {rows, columns}, "x");
    args.disjoint();
    std::vector<double> zeros;  // a missing bias: one row of -0 in x's dtype
    const void* b = args.data("bias");
    if (b == nullptr) {
        zeros.assign(static_cast<std::size_t>(columns), -0.0);
        if (args.dtype() == Dtype::f32) {
            float* f = reinterpret_cast<float*>(zeros.data());
            for (py::ssize_t j = 0; j < columns; ++j) f[j] = -0.0f;
        }
        b = zeros.data();
    }
    const SoftmaxJob job{args.data("x"), b, nullptr, args.mutable_data("out"), rows, columns, bias_rows, scale};
    run_softmax(false, args.dtype(), job);
}

void softmax_backward(py::handle probs, py::handle grad, double scale, py::handle out) {
    const char* kernel = "softmax_backward";
    const FusedArgs args(kernel, {{"probs", probs, false}, {"grad", grad, false}, {"out", out, true}},
                         {"probs", "grad", "out"});
    args.axes("probs", 2);
    const py::ssize_t rows = args["probs"].shape(0), columns = args["probs"].shape(1);
    args.shape("grad", {rows, columns}, "probs");
    args.shape("out", {rows, columns}, "probs");
    args.disjoint();
    const SoftmaxJob job{args.data("probs"), nullptr, args.data("grad"), args.mutable_data("out"), rows, columns, 1,
                         scale};
    run_softmax(true, args.dtype(), job);
}

}  // namespace

void bind_softmax(py::module_& m) {
    m.def("softmax_forward", &softmax_forward, py::arg("x"), py::arg("bias"), py::arg("scale"), py::arg("out"),
          R"doc(out = softmax(x * scale + bias) over each row of a 2-D x, in x's dtype; bias (None, or 2-D with x's
columns and a number of rows that divides x's) adds its row r % bias_rows to row r (8 B/elem fp32).)doc");
    m.def("softmax_backward", &softmax_backward, py::arg("probs"), py::arg("grad"), py::arg("scale"), py::arg("out"),
          R"doc(out = probs * (grad - sum(grad * probs)) * scale over each row: the gradient of softmax_forward's x
(12 B/elem fp32).)doc");
}

}  // namespace minitorch_accum

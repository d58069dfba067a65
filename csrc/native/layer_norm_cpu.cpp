// Native LayerNorm over the last axis, forward and backward: one pass per row sum in the
// lane order of fused_math.cuh (row_loops.h), in the stored dtype (float32 rows in float32
// SIMD, float64 rows in float64); mean and rstd are kept as float64 arrays (a float32
// row's values, exactly). The weight and bias gradients are partial column sums per 64
// rows, added in chunk order, so the result never depends on the number of threads.
#include <cstdint>
#include <optional>
#include <vector>

#include "fused_math.cuh"
#include "native/bindings.h"
#include "native/fused_args.h"
#include "native/parallel.h"
#include "native/row_loops.h"
#include "native/simd.h"

namespace minitorch_accum {

namespace {

struct LayerNormJob {
    const void* x;
    const void* weight;  // a missing weight is a row of ones
    const void* bias;    // a missing bias a row of -0 (x + -0 is x for every x)
    const void* grad;
    void* out;           // forward: y; backward: dx (null: not wanted)
    double* mean;
    double* rstd;
    void* partial_w;     // backward: chunks x columns partial sums in T (scratch when not wanted)
    void* partial_b;
    std::int64_t rows;
    std::int64_t columns;
    double eps;
};

template <class T>
MTA_ALWAYS_INLINE inline void forward_rows(const LayerNormJob& job, std::int64_t begin, std::int64_t end) {
    const std::int64_t n = job.columns;
    const T count = static_cast<T>(n);
    const T eps = MtaNarrow<T>::from(job.eps);
    const T* __restrict w = static_cast<const T*>(job.weight);
    const T* __restrict b = static_cast<const T*>(job.bias);
    for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict x = static_cast<const T*>(job.x) + r * n;
        T* __restrict y = static_cast<T*>(job.out) + r * n;
        const T mean = mta_div(row_lane_sum(n, [&](std::int64_t j) { return x[j]; }), count);
        const T squares = row_lane_sum(n, [&](std::int64_t j) {
            const T c = mta_sub(x[j], mean);
            return mta_mul(c, c);
        });
        const T rstd = mta_div(T(1), mta_sqrt(mta_add(mta_div(squares, count), eps)));
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j) y[j] = mta_layer_norm_element<T>(x[j], mean, rstd, w[j], b[j]);
        job.mean[r] = mean;
        job.rstd[r] = rstd;
    }
}

// One chunk of MTA_COLUMN_CHUNK rows: dx of each row (when wanted), and the chunk's partial
// column sums of g x_hat and of g, in one pass over the row after its two sums. The weight
// is never null here (a missing one is a row of ones) and both partial rows always exist
// (scratch when not wanted), so the loops have no branches.
template <class T>
MTA_ALWAYS_INLINE inline void backward_chunk(const LayerNormJob& job, std::int64_t chunk) {
    const std::int64_t n = job.columns;
    const T count = static_cast<T>(n);
    const T* __restrict w = static_cast<const T*>(job.weight);
    T* __restrict pw = static_cast<T*>(job.partial_w) + chunk * n;
    T* __restrict pb = static_cast<T*>(job.partial_b) + chunk * n;
    for (std::int64_t j = 0; j < n; ++j) pw[j] = pb[j] = T(0);
    const std::int64_t end = std::min(job.rows, (chunk + 1) * MTA_COLUMN_CHUNK);
    for (std::int64_t r = chunk * MTA_COLUMN_CHUNK; r < end; ++r) {
        const T* __restrict x = static_cast<const T*>(job.x) + r * n;
        const T* __restrict g = static_cast<const T*>(job.grad) + r * n;
        const T mean = MtaNarrow<T>::from(job.mean[r]);
        const T rstd = MtaNarrow<T>::from(job.rstd[r]);
        const auto x_hat = [&](std::int64_t j) { return mta_mul(mta_sub(x[j], mean), rstd); };
        const auto gw = [&](std::int64_t j) { return mta_mul(g[j], w[j]); };
        if (job.out) {
            T* __restrict dx = static_cast<T*>(job.out) + r * n;
            T sum_gw = T(0);
            T sum_gw_x_hat = T(0);
            row_lane_sums(n, gw, [&](std::int64_t j) { return mta_mul(gw(j), x_hat(j)); }, sum_gw, sum_gw_x_hat);
            const T mean_gw = mta_div(sum_gw, count);
            const T mean_gw_x_hat = mta_div(sum_gw_x_hat, count);
#pragma omp simd
            for (std::int64_t j = 0; j < n; ++j) {
                const T h = x_hat(j);
                dx[j] = mta_layer_norm_grad_element<T>(gw(j), h, rstd, mean_gw, mean_gw_x_hat);
                pw[j] = mta_add(pw[j], mta_mul(g[j], h));
                pb[j] = mta_add(pb[j], g[j]);
            }
        } else {
#pragma omp simd
            for (std::int64_t j = 0; j < n; ++j) {
                pw[j] = mta_add(pw[j], mta_mul(g[j], x_hat(j)));
                pb[j] = mta_add(pb[j], g[j]);
            }
        }
    }
}

MTA_SIMD_CLONES(forward_rows, (class T), (T), (const LayerNormJob& job, std::int64_t begin, std::int64_t end),
                (job, begin, end))
MTA_SIMD_CLONES(backward_chunk, (class T), (T), (const LayerNormJob& job, std::int64_t chunk), (job, chunk))

template <class T>
void forward_span(const LayerNormJob& job, std::int64_t begin, std::int64_t end) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return forward_rows_avx512<T>(job, begin, end);
        case SimdLevel::avx2: return forward_rows_avx2<T>(job, begin, end);
        default: break;
    }
#endif
    forward_rows<T>(job, begin, end);
}

template <class T>
void backward_span(const LayerNormJob& job, std::int64_t chunk) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return backward_chunk_avx512<T>(job, chunk);
        case SimdLevel::avx2: return backward_chunk_avx2<T>(job, chunk);
        default: break;
    }
#endif
    backward_chunk<T>(job, chunk);
}

// The weight or bias as given, or a row of `fill` (1 for a weight, -0 for a bias) kept in `storage`.
const void* row_or_fill(const FusedArgs& args, const char* role, Dtype dtype, std::int64_t n, double fill,
                        std::vector<double>& storage) {
    if (args.has(role)) return args.data(role);
    if (dtype == Dtype::f64) {
        storage.assign(static_cast<std::size_t>(n), fill);
    } else {
        storage.assign(static_cast<std::size_t>(n + 1) / 2, 0.0);
        float* f = reinterpret_cast<float*>(storage.data());
        for (std::int64_t j = 0; j < n; ++j) f[j] = static_cast<float>(fill);
    }
    return storage.data();
}

// The partials of each column added in chunk order.
template <class T>
void finish_columns(const void* partials, std::int64_t chunks, std::int64_t n, void* out) {
    const T* p = static_cast<const T*>(partials);
    T* o = static_cast<T*>(out);
    for (std::int64_t j = 0; j < n; ++j) o[j] = T(0);
    for (std::int64_t c = 0; c < chunks; ++c) {
        for (std::int64_t j = 0; j < n; ++j) o[j] = mta_add(o[j], p[c * n + j]);
    }
}

void layer_norm_forward(py::handle x, py::handle weight, py::handle bias, double eps, py::handle out, py::handle mean,
                        py::handle rstd) {
    const char* kernel = "layer_norm_forward";
    const FusedArgs args(kernel,
                         {{"x", x, false}, {"weight", weight, false}, {"bias", bias, false}, {"out", out, true},
                          {"mean", mean, true}, {"rstd", rstd, true}},
                         {"x", "weight", "bias", "out"}, {"mean", "rstd"}, {}, {"weight", "bias"});
    args.axes("x", 2);
    const py::ssize_t rows = args["x"].shape(0), columns = args["x"].shape(1);
    args.shape("weight", {columns}, "x");
    args.shape("bias", {columns}, "x");
    args.shape("out", {rows, columns}, "x");
    args.shape("mean", {rows}, "x");
    args.shape("rstd", {rows}, "x");
    args.disjoint();
    std::vector<double> ones, zeros;
    const std::int64_t n = columns;
    const LayerNormJob job{args.data("x"), row_or_fill(args, "weight", args.dtype(), n, 1.0, ones),
                           row_or_fill(args, "bias", args.dtype(), n, -0.0, zeros), nullptr,
                           args.mutable_data("out"), static_cast<double*>(args.mutable_data("mean")),
                           static_cast<double*>(args.mutable_data("rstd")), nullptr, nullptr, rows, columns, eps};
    const std::int64_t per_task = rows_per_task(columns);
    std::optional<py::gil_scoped_release> nogil;
    if (rows * columns >= 4096) nogil.emplace();
    for_each_task((rows + per_task - 1) / per_task, rows * columns, [&](std::int64_t t) {
        const std::int64_t begin = t * per_task, end = std::min<std::int64_t>(rows, begin + per_task);
        if (args.dtype() == Dtype::f32) {
            forward_span<float>(job, begin, end);
        } else {
            forward_span<double>(job, begin, end);
        }
        return false;
    });
}

void layer_norm_backward(py::handle x, py::handle weight, py::handle mean, py::handle rstd, py::handle grad,
                         py::handle grad_x, py::handle grad_weight, py::handle grad_bias) {
    const char* kernel = "layer_norm_backward";
    const FusedArgs args(kernel,
                         {{"x", x, false}, {"weight", weight, false}, {"mean", mean, false}, {"rstd", rstd, false},
                          {"grad", grad, false}, {"grad_x", grad_x, true}, {"grad_weight", grad_weight, true},
                          {"grad_bias", grad_bias, true}},
                         {"x", "weight", "grad", "grad_x", "grad_weight", "grad_bias"}, {"mean", "rstd"}, {},
                         {"weight", "grad_x", "grad_weight", "grad_bias"});
    args.axes("x", 2);
    const py::ssize_t rows = args["x"].shape(0), columns = args["x"].shape(1);
    args.shape("weight", {columns}, "x");
    args.shape("mean", {rows}, "x");
    args.shape("rstd", {rows}, "x");
    args.shape("grad", {rows, columns}, "x");
    args.shape("grad_x", {rows, columns}, "x");
    args.shape("grad_weight", {columns}, "x");
    args.shape("grad_bias", {columns}, "x");
    args.disjoint();
    const std::int64_t chunks = (rows + MTA_COLUMN_CHUNK - 1) / MTA_COLUMN_CHUNK;
    // partial sums in the stored type (doubles hold either: the float32 ones are the first half)
    std::vector<double> partial_w(static_cast<std::size_t>(chunks * columns));
    std::vector<double> partial_b(static_cast<std::size_t>(chunks * columns));
    std::vector<double> ones;
    const LayerNormJob job{args.data("x"), row_or_fill(args, "weight", args.dtype(), columns, 1.0, ones), nullptr,
                           args.data("grad"),
                           args.mutable_data("grad_x"), const_cast<double*>(static_cast<const double*>(args.data("mean"))),
                           const_cast<double*>(static_cast<const double*>(args.data("rstd"))),
                           partial_w.data(), partial_b.data(), rows, columns, 0.0};
    const bool f32 = args.dtype() == Dtype::f32;
    std::optional<py::gil_scoped_release> nogil;
    if (rows * columns >= 4096) nogil.emplace();
    for_each_task(chunks, rows * columns, [&](std::int64_t c) {
        if (f32) {
            backward_span<float>(job, c);
        } else {
            backward_span<double>(job, c);
        }
        return false;
    });
    for (const auto& [partials, role] : {std::pair{&partial_w, "grad_weight"}, std::pair{&partial_b, "grad_bias"}}) {
        if (!args.has(role)) continue;
        if (f32) {
            finish_columns<float>(partials->data(), chunks, columns, args.mutable_data(role));
        } else {
            finish_columns<double>(partials->data(), chunks, columns, args.mutable_data(role));
        }
    }
}

}  // namespace

void bind_layer_norm(py::module_& m) {
    m.def("layer_norm_forward", &layer_norm_forward, py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("eps"),
          py::arg("out"), py::arg("mean"), py::arg("rstd"),
          R"doc(out = (x - mean) * rstd * weight + bias over the last axis of a 2-D x, computed in x's dtype; mean
and rstd (float64 arrays, one per row) are written for the backward. weight and bias may be None (8 B/elem fp32).)doc");
    m.def("layer_norm_backward", &layer_norm_backward, py::arg("x"), py::arg("weight"), py::arg("mean"),
          py::arg("rstd"), py::arg("grad"), py::arg("grad_x"), py::arg("grad_weight"), py::arg("grad_bias"),
          R"doc(The gradients of layer_norm_forward: each of grad_x, grad_weight, grad_bias that is not None
(12 B/elem fp32).)doc");
}

}  // namespace minitorch_accum

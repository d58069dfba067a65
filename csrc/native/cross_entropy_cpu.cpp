// Native softmax cross entropy with ignore_index, forward and backward: each row's max,
// its sum of exponentials (lane order of fused_math.cuh) and log-sum-exp in the stored
// dtype (float32 logits in float32 SIMD, float64 in float64), our exp and log; the
// log-sum-exp is kept as a float64 array for the backward (a float32 row's value, exactly).
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

struct CrossEntropyJob {
    const void* logits;
    const std::int64_t* targets;
    std::int64_t ignore_index;
    double* lse;          // forward writes it, backward reads it
    void* shift;          // forward, in T: each row's shift, then (rows on) its sum, then log-sum-exp
    void* losses;         // forward
    const void* grad;     // backward: one per item
    void* out;            // backward: like logits
    std::int64_t rows;
    std::int64_t classes;
};

// Each row's shift, then each row's sum of exponentials, then (one vector loop over the
// rows) its log-sum-exp, then its loss: one pass over the rows per stage, so that the rows'
// chains (a max's lane tree, then the exps, then a sum's) overlap instead of queuing.
template <class T>
MTA_ALWAYS_INLINE inline void forward_rows(const CrossEntropyJob& job, std::int64_t begin, std::int64_t end) {
    const std::int64_t n = job.classes;
    T* __restrict shift = static_cast<T*>(job.shift);
    T* __restrict sums = shift + job.rows;
    for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict x = static_cast<const T*>(job.logits) + r * n;
        shift[r] = mta_softmax_shift(row_lane_max(n, [&](std::int64_t j) { return x[j]; }));
    }
    for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict x = static_cast<const T*>(job.logits) + r * n;
        const T s = shift[r];
        sums[r] = row_lane_sum(n, [&](std::int64_t j) { return mta_softmax_exp(mta_sub(x[j], s)); });
    }
#pragma omp simd
    for (std::int64_t r = begin; r < end; ++r) sums[r] = mta_add(shift[r], mta_log_sum(sums[r]));
    for (std::int64_t r = begin; r < end; ++r) {
        const std::int64_t t = job.targets[r];
        const T* x = static_cast<const T*>(job.logits) + r * n;
        job.lse[r] = sums[r];
        static_cast<T*>(job.losses)[r] = t != job.ignore_index ? mta_sub(sums[r], x[t]) : T(0);
    }
}

template <class T>
MTA_ALWAYS_INLINE inline void backward_rows(const CrossEntropyJob& job, std::int64_t begin, std::int64_t end) {
    const std::int64_t n = job.classes;
    for (std::int64_t r = begin; r < end; ++r) {
        const T* __restrict x = static_cast<const T*>(job.logits) + r * n;
        T* __restrict out = static_cast<T*>(job.out) + r * n;
        const std::int64_t t = job.targets[r];
        const bool valid = t != job.ignore_index;
        const T w = valid ? static_cast<const T*>(job.grad)[r] : T(0);
        const T lse = MtaNarrow<T>::from(job.lse[r]);
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j) {
            out[j] = mta_cross_entropy_grad_element<T>(x[j], lse, w, valid && j == t);
        }
    }
}

MTA_SIMD_CLONES(forward_rows, (class T), (T), (const CrossEntropyJob& job, std::int64_t begin, std::int64_t end),
                (job, begin, end))
MTA_SIMD_CLONES(backward_rows, (class T), (T), (const CrossEntropyJob& job, std::int64_t begin, std::int64_t end),
                (job, begin, end))

template <class T>
void rows_span(bool backward, const CrossEntropyJob& job, std::int64_t begin, std::int64_t end) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512:
            return backward ? backward_rows_avx512<T>(job, begin, end) : forward_rows_avx512<T>(job, begin, end);
        case SimdLevel::avx2:
            return backward ? backward_rows_avx2<T>(job, begin, end) : forward_rows_avx2<T>(job, begin, end);
        default: break;
    }
#endif
    return backward ? backward_rows<T>(job, begin, end) : forward_rows<T>(job, begin, end);
}

void run_rows(bool backward, Dtype dtype, const CrossEntropyJob& job) {
    const std::int64_t per_task = rows_per_task(job.classes);
    std::optional<py::gil_scoped_release> nogil;
    if (job.rows * job.classes >= 4096) nogil.emplace();
    for_each_task((job.rows + per_task - 1) / per_task, job.rows * job.classes, [&](std::int64_t t) {
        const std::int64_t begin = t * per_task, end = std::min<std::int64_t>(job.rows, begin + per_task);
        if (dtype == Dtype::f32) {
            rows_span<float>(backward, job, begin, end);
        } else {
            rows_span<double>(backward, job, begin, end);
        }
        return false;
    });
}

// The shapes after the arrays' dtypes and layouts; then overlaps, then the targets' values.
void check_rows(const char* kernel, const FusedArgs& args, std::int64_t ignore_index,
                std::initializer_list<const char*> per_item, bool has_out) {
    args.axes("logits", 2);
    const py::ssize_t rows = args["logits"].shape(0), classes = args["logits"].shape(1);
    if (classes == 0) {
        raise_value_error(std::string(kernel) + ": " + describe("logits", args["logits"]) +
                          " must have at least one class");
    }
    args.shape("targets", {rows}, "logits");
    for (const char* role : per_item) args.shape(role, {rows}, "logits");
    if (has_out) args.shape("out", {rows, classes}, "logits");
    args.disjoint();
    check_targets(kernel, static_cast<const std::int64_t*>(args.data("targets")), rows, classes, ignore_index);
}

std::int64_t cross_entropy_forward(py::handle logits, py::handle targets, std::int64_t ignore_index,
                                   py::handle losses, py::handle lse) {
    const char* kernel = "cross_entropy_forward";
    const FusedArgs args(kernel,
                         {{"logits", logits, false}, {"targets", targets, false}, {"losses", losses, true},
                          {"lse", lse, true}},
                         {"logits", "losses"}, {"lse"}, {"targets"});
    check_rows(kernel, args, ignore_index, {"losses", "lse"}, false);
    std::vector<double> shift(2 * static_cast<std::size_t>(args["logits"].shape(0)));  // room for T = double
    const CrossEntropyJob job{args.data("logits"), static_cast<const std::int64_t*>(args.data("targets")),
                              ignore_index, static_cast<double*>(args.mutable_data("lse")), shift.data(),
                              args.mutable_data("losses"), nullptr, nullptr, args["logits"].shape(0),
                              args["logits"].shape(1)};
    std::int64_t count = 0;
    for (std::int64_t r = 0; r < job.rows; ++r) count += job.targets[r] != ignore_index;
    run_rows(false, args.dtype(), job);
    return count;
}

void cross_entropy_backward(py::handle logits, py::handle targets, std::int64_t ignore_index, py::handle lse,
                            py::handle grad, py::handle out) {
    const char* kernel = "cross_entropy_backward";
    const FusedArgs args(kernel,
                         {{"logits", logits, false}, {"targets", targets, false}, {"lse", lse, false},
                          {"grad", grad, false}, {"out", out, true}},
                         {"logits", "grad", "out"}, {"lse"}, {"targets"});
    check_rows(kernel, args, ignore_index, {"lse", "grad"}, true);
    const CrossEntropyJob job{args.data("logits"), static_cast<const std::int64_t*>(args.data("targets")),
                              ignore_index, const_cast<double*>(static_cast<const double*>(args.data("lse"))),
                              nullptr, nullptr, args.data("grad"), args.mutable_data("out"),
                              args["logits"].shape(0), args["logits"].shape(1)};
    run_rows(true, args.dtype(), job);
}

}  // namespace

void bind_cross_entropy(py::module_& m) {
    m.def("cross_entropy_forward", &cross_entropy_forward, py::arg("logits"), py::arg("targets"),
          py::arg("ignore_index"), py::arg("losses"), py::arg("lse"),
          R"doc(losses[i] = logsumexp(logits[i]) - logits[i, targets[i]] (0 where targets[i] == ignore_index) and
lse[i] = logsumexp(logits[i]) (a float64 array; computed in the logits' dtype) for 2-D logits; returns the number of
items not ignored (4 B/elem fp32).)doc");
    m.def("cross_entropy_backward", &cross_entropy_backward, py::arg("logits"), py::arg("targets"),
          py::arg("ignore_index"), py::arg("lse"), py::arg("grad"), py::arg("out"),
          R"doc(out = grad[i] * (softmax(logits[i]) - one_hot(targets[i])), 0 on ignored rows (8 B/elem fp32).)doc");
}

}  // namespace minitorch_accum

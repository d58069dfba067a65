// Native global L2 norm: per-chunk sums of squares (fp32 for fp32/fp16/bf16
// arrays, fp64 for fp64, as on the GPU), then one fp64 sum of the partials in
// chunk order, so the result does not depend on the number of threads.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accum_math.cuh"
#include "multi_tensor.cuh"
#include "native/array_args.h"
#include "native/bindings.h"
#include "native/parallel.h"

namespace minitorch_accum {

namespace {

template <class T, class S>
double sum_squares(const T* __restrict x, std::int64_t n) {
    const auto* __restrict stored = reinterpret_cast<const typename StoredAs<T>::type*>(x);
    S sum = S(0);
#pragma omp simd reduction(+ : sum)
    for (std::int64_t i = 0; i < n; ++i) {
        const S v = mta_widen<S>(StoredAs<T>::value(stored[i]));
        sum += v * v;
    }
    return static_cast<double>(sum);
}

struct NormJob {
    const void* data;
    std::int64_t size;
    Dtype dtype;
};

double sum_squares_range(const NormJob& job, std::int64_t begin, std::int64_t end) {
    const std::int64_t n = end - begin;
    switch (job.dtype) {
        case Dtype::f32: return sum_squares<float, float>(static_cast<const float*>(job.data) + begin, n);
        case Dtype::f16: return sum_squares<mta_half, float>(static_cast<const mta_half*>(job.data) + begin, n);
        case Dtype::bf16:
            return sum_squares<mta_bfloat16, float>(static_cast<const mta_bfloat16*>(job.data) + begin, n);
        case Dtype::f64: return sum_squares<double, double>(static_cast<const double*>(job.data) + begin, n);
        default: return 0.0;
    }
}

double l2_norm_of(const char* kernel, const std::vector<py::handle>& arrays, bool indexed_roles) {
    std::vector<NormJob> jobs;
    jobs.reserve(arrays.size());
    for (std::size_t i = 0; i < arrays.size(); ++i) {
        const std::string role = indexed_roles ? indexed("tensors", i) : std::string("x");
        py::array a = require_array(arrays[i], kernel, role);
        const Dtype d = dtype_of(a);
        if (d == Dtype::other) {
            raise_type_error(std::string(kernel) + ": unsupported dtype " + describe(role, a) +
                             "; supported: float32, float16, bfloat16, float64");
        }
        require_contiguous(a, kernel, role, false);
        jobs.push_back(NormJob{a.data(), static_cast<std::int64_t>(a.size()), d});
    }
    std::vector<std::pair<std::int32_t, std::int64_t>> chunks;
    std::int64_t total = 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        for (std::int64_t b = 0; b < jobs[j].size; b += MTA_CHUNK_SIZE) chunks.emplace_back(std::int32_t(j), b);
        total += jobs[j].size;
    }
    std::vector<double> partials(chunks.size(), 0.0);
    {
        std::optional<py::gil_scoped_release> nogil;
        if (total >= 4096) nogil.emplace();
        for_each_task(static_cast<std::int64_t>(chunks.size()), total, [&](std::int64_t c) {
            const NormJob& job = jobs[chunks[c].first];
            const std::int64_t begin = chunks[c].second;
            const std::int64_t end = std::min<std::int64_t>(job.size, begin + MTA_CHUNK_SIZE);
            partials[c] = sum_squares_range(job, begin, end);
            return false;
        });
    }
    double sum = 0.0;
    for (const double p : partials) sum += p;
    return std::sqrt(sum);
}

}  // namespace

void bind_l2_norm(py::module_& m) {
    m.def(
        "l2_norm", [](py::handle x) { return l2_norm_of("l2_norm", {x}, false); }, py::arg("x"),
        R"doc(Euclidean norm of all elements of x (f32, f16, bf16 or f64), as a float.)doc");
    m.def(
        "multi_l2_norm",
        [](py::handle tensors) {
            const py::sequence seq = require_list(tensors, "multi_l2_norm", "tensors");
            std::vector<py::handle> arrays;
            arrays.reserve(seq.size());
            for (py::handle h : seq) arrays.push_back(h);
            return l2_norm_of("multi_l2_norm", arrays, true);
        },
        py::arg("tensors"),
        R"doc(Global Euclidean norm of all elements of a list of arrays (for clipping by global norm).)doc");
}

}  // namespace minitorch_accum

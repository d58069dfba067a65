// Native global L2 norm: per-chunk sums of squares in fp64 (whatever the
// array's dtype), then one fp64 sum of the partials in chunk order, so the
// result does not depend on the number of threads.
//
// fp64 squares of fp32/fp16/bf16 values neither overflow nor underflow, so
// their norm is right to rounding in one pass. fp64 values may: when the plain
// sum is inf or below MTA_L2_SAFE_MIN, a second pass finds max |x| and a third
// sums the squares of x * 2^-e, e the exponent of the max (an exact scaling),
// as the NumPy reference and the CUDA path do (kernels/l2_scaling.py).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "accum_math.cuh"
#include "multi_tensor.cuh"
#include "native/array_args.h"
#include "native/bindings.h"
#include "native/parallel.h"
#include "native/simd.h"

namespace minitorch_accum {

namespace {

// Sums of squares at or above this lost nothing to fp64 underflow that matters
// (kernels/l2_scaling.py: SAFE_MIN_SUM, MIN_SCALE_EXPONENT).
constexpr double kSafeMinSum = 0x1p-960;
// The scaling exponent is kept within range so that 2^-e stays a finite double.
constexpr int kMinScaleExponent = -1000;

// Exact: every stored dtype widens to fp64 without rounding.
template <class T>
inline double as_double(T x) {
    if constexpr (std::is_same_v<T, double>) {
        return x;
    } else {
        return mta_widen<double>(mta_widen<float>(x));
    }
}

template <class T>
MTA_ALWAYS_INLINE inline double sum_squares(const T* __restrict x, std::int64_t n, double scale) {
    const auto* __restrict stored = reinterpret_cast<const typename StoredAs<T>::type*>(x);
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t i = 0; i < n; ++i) {
        const double v = as_double(StoredAs<T>::value(stored[i])) * scale;
        sum += v * v;
    }
    return sum;
}

template <class T>
MTA_ALWAYS_INLINE inline double max_abs(const T* __restrict x, std::int64_t n) {
    const auto* __restrict stored = reinterpret_cast<const typename StoredAs<T>::type*>(x);
    double m = 0.0;
#pragma omp simd reduction(max : m)
    for (std::int64_t i = 0; i < n; ++i) {
        const double v = std::fabs(as_double(StoredAs<T>::value(stored[i])));
        m = v > m ? v : m;
    }
    return m;
}

// The GEMM fusion bounds every weight gradient by the norms of its two factors (accum's
// arena store), ~18 norms of up to 256K floats per transformer micro-batch: the widened
// float squares run 8 doubles wide on AVX-512 (2 on the SSE2 baseline).
MTA_SIMD_CLONES(sum_squares, (class T), (T), (const T* x, std::int64_t n, double scale), (x, n, scale))
MTA_SIMD_CLONES(max_abs, (class T), (T), (const T* x, std::int64_t n), (x, n))

template <class T>
double sum_squares_span(const T* x, std::int64_t n, double scale) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return sum_squares_avx512<T>(x, n, scale);
        case SimdLevel::avx2: return sum_squares_avx2<T>(x, n, scale);
        default: break;
    }
#endif
    return sum_squares<T>(x, n, scale);
}

template <class T>
double max_abs_span(const T* x, std::int64_t n) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return max_abs_avx512<T>(x, n);
        case SimdLevel::avx2: return max_abs_avx2<T>(x, n);
        default: break;
    }
#endif
    return max_abs<T>(x, n);
}

struct NormJob {
    const void* data;
    std::int64_t size;
    Dtype dtype;
};

// A pass over a chunk: `scale` >= 0 sums squares of x * scale, scale < 0 takes max |x|.
double chunk_pass(const NormJob& job, std::int64_t begin, std::int64_t end, double scale) {
    const std::int64_t n = end - begin;
    const auto run = [&](const auto* x) {
        return scale < 0 ? max_abs_span(x + begin, n) : sum_squares_span(x + begin, n, scale);
    };
    switch (job.dtype) {
        case Dtype::f32: return run(static_cast<const float*>(job.data));
        case Dtype::f16: return run(static_cast<const mta_half*>(job.data));
        case Dtype::bf16: return run(static_cast<const mta_bfloat16*>(job.data));
        case Dtype::f64: return run(static_cast<const double*>(job.data));
        default: return 0.0;
    }
}

double l2_norm_of(const char* kernel, const std::vector<py::object>& items, bool indexed_roles) {
    CallArrays arrays(kernel);
    std::vector<NormJob> jobs;
    jobs.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        const Role role = indexed_roles ? Role("tensors", i) : Role("x");
        py::array a = arrays.add(items[i], role, false);
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
    const auto pass = [&](double scale) {
        std::optional<py::gil_scoped_release> nogil;
        if (total >= 4096) nogil.emplace();
        for_each_task(static_cast<std::int64_t>(chunks.size()), total, [&](std::int64_t c) {
            const NormJob& job = jobs[chunks[c].first];
            const std::int64_t begin = chunks[c].second;
            const std::int64_t end = std::min<std::int64_t>(job.size, begin + MTA_CHUNK_SIZE);
            partials[c] = chunk_pass(job, begin, end, scale);
            return false;
        });
    };
    pass(1.0);
    double sum = 0.0;
    for (const double p : partials) sum += p;
    if (std::isnan(sum) || (sum >= kSafeMinSum && std::isfinite(sum))) return std::sqrt(sum);
    pass(-1.0);
    double max = 0.0;
    for (const double p : partials) max = p > max ? p : max;
    if (max == 0.0 || std::isinf(max)) return max;
    const int e = std::max(std::ilogb(max) + 1, kMinScaleExponent);
    pass(std::ldexp(1.0, -e));
    sum = 0.0;
    for (const double p : partials) sum += p;
    return std::ldexp(std::sqrt(sum), e);
}

}  // namespace

void bind_l2_norm(py::module_& m) {
    m.def(
        "l2_norm",
        [](py::handle x) { return l2_norm_of("l2_norm", {py::reinterpret_borrow<py::object>(x)}, false); },
        py::arg("x"), R"doc(Euclidean norm of all elements of x (f32, f16, bf16 or f64), as a float.)doc");
    m.def(
        "multi_l2_norm",
        [](py::handle tensors) {
            const py::sequence seq = require_list(tensors, "multi_l2_norm", "tensors");
            std::vector<py::object> items;
            items.reserve(seq.size());
            for (py::handle h : seq) items.push_back(py::reinterpret_borrow<py::object>(h));
            return l2_norm_of("multi_l2_norm", items, true);
        },
        py::arg("tensors"),
        R"doc(Global Euclidean norm of all elements of a list of arrays (for clipping by global norm).)doc");
}

}  // namespace minitorch_accum

// Native CPU accumulation kernels over NumPy buffers: the element math of
// accum_math.cuh in loops the compiler vectorizes, spread over the native
// thread pool (parallel.h), with the GIL released.
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
#include "native/simd.h"

namespace minitorch_accum {

namespace {

// Below this size releasing the GIL costs more than the pass itself.
constexpr std::int64_t kReleaseGilMinElements = 4096;

// The element loop of every accumulation kernel, for one span.
template <class A, class G, int MODE, bool CHECK>
MTA_ALWAYS_INLINE inline bool accumulate_loop(A* __restrict acc, A* __restrict comp, const G* __restrict g,
                                              std::int64_t n, A s) {
    const auto* __restrict stored = reinterpret_cast<const typename StoredAs<G>::type*>(g);
    int nonfinite = 0;
#pragma omp simd reduction(| : nonfinite)
    for (std::int64_t i = 0; i < n; ++i) {
        const G x = StoredAs<G>::value(stored[i]);
        if constexpr (CHECK) nonfinite |= mta_is_finite(x) ? 0 : 1;
        const A y = mta_scaled(s, x);
        if constexpr (MtaMode<MODE>::compensated) {
            mta_accumulate_element<MODE>(acc[i], comp[i], y);
        } else {
            A unused = A(0);
            mta_accumulate_element<MODE>(acc[i], unused, y);
        }
    }
    return nonfinite != 0;
}

// The same loop compiled for AVX-512 and for AVX2 beside the SSE2 baseline;
// accumulate_span runs the widest the CPU has (simd.h). Plain add_scale from
// DRAM is memory-bound at any width, but the Neumaier loop (about ten
// operations per element, selects done on bits) was compute-bound in SSE2:
// 2^26 elements, 2 threads, 16.3 -> 34.3 GB/s with AVX-512 (2^22: 16.1 ->
// 33.0); cast_add_scale in cache, 2^14: 58 -> 70 GB/s.
template <class A, class G, int MODE, bool CHECK>
MTA_TARGET_AVX512 bool accumulate_span_avx512(A* acc, A* comp, const G* g, std::int64_t n, A s) {
    return accumulate_loop<A, G, MODE, CHECK>(acc, comp, g, n, s);
}

template <class A, class G, int MODE, bool CHECK>
MTA_TARGET_AVX2 bool accumulate_span_avx2(A* acc, A* comp, const G* g, std::int64_t n, A s) {
    return accumulate_loop<A, G, MODE, CHECK>(acc, comp, g, n, s);
}

template <class A, class G, int MODE, bool CHECK>
bool accumulate_span(A* acc, A* comp, const G* g, std::int64_t n, A s) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return accumulate_span_avx512<A, G, MODE, CHECK>(acc, comp, g, n, s);
        case SimdLevel::avx2: return accumulate_span_avx2<A, G, MODE, CHECK>(acc, comp, g, n, s);
        default: break;
    }
#endif
    return accumulate_loop<A, G, MODE, CHECK>(acc, comp, g, n, s);
}

struct AccumulateJob {
    void* acc;
    void* comp;
    const void* g;
    std::int64_t size;
    int kind;
};

template <class A, class G, int MODE, bool CHECK>
bool accumulate_typed(const AccumulateJob& job, std::int64_t begin, std::int64_t end, double scale) {
    A* acc = static_cast<A*>(job.acc) + begin;
    A* comp = job.comp ? static_cast<A*>(job.comp) + begin : nullptr;
    const G* g = static_cast<const G*>(job.g) + begin;
    return accumulate_span<A, G, MODE, CHECK>(acc, comp, g, end - begin, static_cast<A>(scale));
}

template <int MODE, bool CHECK>
bool accumulate_by_kind(const AccumulateJob& job, std::int64_t begin, std::int64_t end, double scale) {
    switch (job.kind) {
        case MTA_KIND_F32_F32: return accumulate_typed<float, float, MODE, CHECK>(job, begin, end, scale);
        case MTA_KIND_F32_F16: return accumulate_typed<float, mta_half, MODE, CHECK>(job, begin, end, scale);
        case MTA_KIND_F32_BF16: return accumulate_typed<float, mta_bfloat16, MODE, CHECK>(job, begin, end, scale);
        case MTA_KIND_F64_F64: return accumulate_typed<double, double, MODE, CHECK>(job, begin, end, scale);
        case MTA_KIND_F64_F32: return accumulate_typed<double, float, MODE, CHECK>(job, begin, end, scale);
        default: return false;
    }
}

template <bool CHECK>
bool accumulate_mode(int mode, const AccumulateJob& job, std::int64_t begin, std::int64_t end, double scale) {
    switch (mode) {
        case MTA_MODE_ADD: return accumulate_by_kind<MTA_MODE_ADD, CHECK>(job, begin, end, scale);
        case MTA_MODE_COPY: return accumulate_by_kind<MTA_MODE_COPY, CHECK>(job, begin, end, scale);
        case MTA_MODE_ADD_COMPENSATED:
            return accumulate_by_kind<MTA_MODE_ADD_COMPENSATED, CHECK>(job, begin, end, scale);
        default: return accumulate_by_kind<MTA_MODE_COPY_COMPENSATED, CHECK>(job, begin, end, scale);
    }
}

bool accumulate_range(int mode, bool check, const AccumulateJob& job, std::int64_t begin, std::int64_t end,
                      double scale) {
    return check ? accumulate_mode<true>(mode, job, begin, end, scale)
                 : accumulate_mode<false>(mode, job, begin, end, scale);
}

bool is_compensated(int mode) { return mode == MTA_MODE_ADD_COMPENSATED || mode == MTA_MODE_COPY_COMPENSATED; }

// Checks one (acc[, comp], g) triple in the order of kernels/validation.py.
AccumulateJob prepare(CallArrays& arrays, int mode, bool cast_only, py::handle acc_h, py::handle comp_h,
                      py::handle g_h, const Role& acc_role, const Role& comp_role, const Role& g_role) {
    const char* kernel = arrays.kernel();
    py::array acc = arrays.add(acc_h, acc_role, true);
    py::array g = arrays.add(g_h, g_role, false);
    const int kind = accumulate_kind(acc, acc_role, g, g_role, kernel);
    if (cast_only && kind != MTA_KIND_F32_F16 && kind != MTA_KIND_F32_BF16) {
        raise_type_error(std::string(kernel) + ": " + describe(g_role, g) +
                         " must be float16 or bfloat16 into a float32 accumulator, got " +
                         describe(acc_role, acc));
    }
    require_contiguous(acc, kernel, acc_role, true);
    require_contiguous(g, kernel, g_role, false);
    require_same_size(acc, acc_role, g, g_role, kernel);
    AccumulateJob job{acc.mutable_data(), nullptr, g.data(), static_cast<std::int64_t>(acc.size()), kind};
    if (is_compensated(mode)) {
        py::array comp = arrays.add(comp_h, comp_role, true);
        if (comp.dtype().num() != acc.dtype().num()) {
            raise_type_error(std::string(kernel) + ": " + describe(comp_role, comp) + " must have the dtype of " +
                             describe(acc_role, acc));
        }
        require_contiguous(comp, kernel, comp_role, true);
        require_same_size(acc, acc_role, comp, comp_role, kernel);
        job.comp = comp.mutable_data();
    }
    return job;
}

void accumulate_one(const char* kernel, int mode, bool cast_only, py::handle acc, py::handle comp, py::handle g,
                    double scale, py::handle flag) {
    CallArrays arrays(kernel);
    const AccumulateJob job = prepare(arrays, mode, cast_only, acc, comp, g, "acc", "comp", "g");
    int* flag_cell = flag_pointer(arrays, flag);
    arrays.require_disjoint();
    const bool check = flag_cell != nullptr;
    bool nonfinite;
    {
        std::optional<py::gil_scoped_release> nogil;
        if (job.size >= kReleaseGilMinElements) nogil.emplace();
        nonfinite = for_each_span(job.size, [&](std::int64_t begin, std::int64_t end) {
            return accumulate_range(mode, check, job, begin, end, scale);
        });
    }
    if (nonfinite) *flag_cell = 1;
}

void accumulate_many(const char* kernel, int mode, bool cast_only, py::handle accs_h, py::handle comps_h,
                     py::handle gs_h, double scale, py::handle flag) {
    const bool compensated = is_compensated(mode);
    std::vector<std::pair<std::string, py::handle>> named{{"accs", accs_h}};
    if (compensated) named.emplace_back("comps", comps_h);
    named.emplace_back("gs", gs_h);
    const std::vector<py::sequence> lists = require_lists(kernel, named);
    const py::sequence& accs = lists.front();
    const py::sequence& gs = lists.back();
    const std::size_t n = accs.size();
    // Holds every item until the kernel is done: the GIL is released while it
    // runs, and the lists may be emptied meanwhile by another thread.
    CallArrays arrays(kernel);
    std::vector<AccumulateJob> jobs;
    jobs.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const py::object comp = compensated ? py::object(lists[1][i]) : py::object();
        jobs.push_back(
            prepare(arrays, mode, cast_only, accs[i], comp, gs[i], Role("accs", i), Role("comps", i), Role("gs", i)));
    }
    int* flag_cell = flag_pointer(arrays, flag);
    arrays.require_disjoint();
    const bool check = flag_cell != nullptr;

    // The same 64K-element chunks as the CUDA chunk table, so one long tensor
    // and many short ones spread over threads alike.
    std::vector<std::pair<std::int32_t, std::int64_t>> chunks;
    std::int64_t total = 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        for (std::int64_t b = 0; b < jobs[j].size; b += MTA_CHUNK_SIZE) {
            chunks.emplace_back(static_cast<std::int32_t>(j), b);
        }
        total += jobs[j].size;
    }
    bool nonfinite;
    {
        std::optional<py::gil_scoped_release> nogil;
        if (total >= kReleaseGilMinElements) nogil.emplace();
        nonfinite = for_each_task(static_cast<std::int64_t>(chunks.size()), total, [&](std::int64_t c) {
            const AccumulateJob& job = jobs[chunks[c].first];
            const std::int64_t begin = chunks[c].second;
            const std::int64_t end = std::min<std::int64_t>(job.size, begin + MTA_CHUNK_SIZE);
            return accumulate_range(mode, check, job, begin, end, scale);
        });
    }
    if (nonfinite) *flag_cell = 1;
}

}  // namespace

void bind_accumulate(py::module_& m) {
    const auto one = [&m](const char* name, int mode, bool cast_only, const char* doc) {
        m.def(
            name,
            [name, mode, cast_only](py::handle acc, py::handle g, double scale, py::handle flag) {
                accumulate_one(name, mode, cast_only, acc, py::handle(), g, scale, flag);
            },
            py::arg("acc"), py::arg("g"), py::arg("scale"), py::arg("flag") = py::none(), doc);
    };
    one("add_scale", MTA_MODE_ADD, false, R"doc(acc += s * g in place, s = scale rounded to acc's dtype.

Pairs (acc, g): (f32, f32), (f32, f16), (f32, bf16), (f64, f64), (f64, f32).
flag, an int32 array of shape (1,), is set to 1 when g holds inf or nan.)doc");
    one("copy_scale", MTA_MODE_COPY, false, R"doc(acc = s * g in place (the first micro-batch of a window).)doc");
    one("cast_add_scale", MTA_MODE_ADD, true,
        R"doc(acc(f32) += s * float(g) for a float16 or bfloat16 g, in one pass.)doc");

    const auto compensated = [&m](const char* name, int mode, const char* doc) {
        m.def(
            name,
            [name, mode](py::handle acc, py::handle comp, py::handle g, double scale, py::handle flag) {
                accumulate_one(name, mode, false, acc, comp, g, scale, flag);
            },
            py::arg("acc"), py::arg("comp"), py::arg("g"), py::arg("scale"), py::arg("flag") = py::none(), doc);
    };
    compensated("add_scale_compensated", MTA_MODE_ADD_COMPENSATED,
                R"doc(Neumaier summation of s * g into (acc, comp); acc + comp is the running sum.)doc");
    compensated("copy_scale_compensated", MTA_MODE_COPY_COMPENSATED, R"doc(acc = s * g and comp = 0.)doc");

    const auto many = [&m](const char* name, int mode, bool cast_only, const char* doc) {
        m.def(
            name,
            [name, mode, cast_only](py::handle accs, py::handle gs, double scale, py::handle flag) {
                accumulate_many(name, mode, cast_only, accs, py::handle(), gs, scale, flag);
            },
            py::arg("accs"), py::arg("gs"), py::arg("scale"), py::arg("flag") = py::none(), doc);
    };
    many("multi_add_scale", MTA_MODE_ADD, false,
         R"doc(add_scale over lists of (acc, g) pairs of mixed sizes and dtypes, in one call.)doc");
    many("multi_copy_scale", MTA_MODE_COPY, false, R"doc(copy_scale over lists, in one call.)doc");
    many("multi_cast_add_scale", MTA_MODE_ADD, true, R"doc(cast_add_scale over lists, in one call.)doc");

    const auto many_compensated = [&m](const char* name, int mode, const char* doc) {
        m.def(
            name,
            [name, mode](py::handle accs, py::handle comps, py::handle gs, double scale, py::handle flag) {
                accumulate_many(name, mode, false, accs, comps, gs, scale, flag);
            },
            py::arg("accs"), py::arg("comps"), py::arg("gs"), py::arg("scale"), py::arg("flag") = py::none(),
            doc);
    };
    many_compensated("multi_add_scale_compensated", MTA_MODE_ADD_COMPENSATED,
                     R"doc(add_scale_compensated over lists, in one call.)doc");
    many_compensated("multi_copy_scale_compensated", MTA_MODE_COPY_COMPENSATED,
                     R"doc(copy_scale_compensated over lists, in one call.)doc");
}

}  // namespace minitorch_accum

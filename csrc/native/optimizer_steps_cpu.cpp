// Native fused optimizer steps (SGD-momentum, AdamW) over NumPy buffers.
//
// The scalars arrive as one object derived on the host (SgdScalars or
// AdamScalars of kernels/optimizer_scalars.py, float64 values) and are rounded
// here once to the parameter dtype, exactly as the NumPy reference and the
// CUDA launch path round them. The NumPy reference has these very signatures.
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

// Parameter, gradient and up to two state arrays of one tensor.
struct StepJob {
    void* p;
    const void* g;
    void* s0;  // momentum buffer / exp_avg
    void* s1;  // exp_avg_sq
    std::int64_t size;
    Dtype dtype;
};

// The scalars object (SgdScalars or AdamScalars of kernels/optimizer_scalars.py)
// is read into the float64 struct by field name, then rounded once to the
// parameter dtype; both are expanded from the one field list in accum_math.cuh.
template <class V>
V field(py::handle h, const char* kernel, const char* name) {
    try {
        return py::getattr(h, name).cast<V>();
    } catch (const py::error_already_set&) {
    } catch (const py::cast_error&) {
    }
    raise_type_error(std::string(kernel) + ": scalars." + name + " is missing or not a " +
                     (std::is_same_v<V, bool> ? "bool" : "number") + " (got " +
                     std::string(py::str(py::type::of(h).attr("__qualname__"))) +
                     "; pass the scalars of minitorch_accum.kernels.optimizer_scalars)");
}

template <class S>
S read_scalars(py::handle h, const char* kernel) {
    S s{};
    S::for_each_field([&](const char* name, auto member) {
        if constexpr (std::is_same_v<std::remove_reference_t<decltype(s.*member)>, int>) {
            s.*member = field<bool>(h, kernel, name) ? 1 : 0;
        } else {
            s.*member = field<double>(h, kernel, name);
        }
    });
    return s;
}

template <class T>
MTA_ALWAYS_INLINE inline void sgd_loop(T* __restrict p, const T* __restrict g, T* __restrict buf, std::int64_t n,
                                       const MtaSgdScalars<T>& h) {
    if (buf != nullptr && h.momentum != T(0)) {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) mta_sgd_momentum_update(p[i], g[i], buf[i], h);
    } else {
#pragma omp simd
        for (std::int64_t i = 0; i < n; ++i) {
            T unused = T(0);
            mta_sgd_momentum_update(p[i], g[i], unused, h);
        }
    }
}

template <class T>
MTA_ALWAYS_INLINE inline void adam_loop(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v,
                                        std::int64_t n, const MtaAdamScalars<T>& h) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) mta_adam_update(p[i], g[i], m[i], v[i], h);
}

// Elementwise, so every vector width gives the same bits; AVX-512 runs 16 floats per operation
// (the SSE2 baseline 4), AdamW's division and square root included.
MTA_SIMD_CLONES(sgd_loop, (class T), (T),
                (T* p, const T* g, T* buf, std::int64_t n, const MtaSgdScalars<T>& h), (p, g, buf, n, h))
MTA_SIMD_CLONES(adam_loop, (class T), (T),
                (T* p, const T* g, T* m, T* v, std::int64_t n, const MtaAdamScalars<T>& h), (p, g, m, v, n, h))

template <class T>
void sgd_span(T* p, const T* g, T* buf, std::int64_t n, const MtaSgdScalars<T>& h) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return sgd_loop_avx512<T>(p, g, buf, n, h);
        case SimdLevel::avx2: return sgd_loop_avx2<T>(p, g, buf, n, h);
        default: break;
    }
#endif
    sgd_loop<T>(p, g, buf, n, h);
}

template <class T>
void adam_span(T* p, const T* g, T* m, T* v, std::int64_t n, const MtaAdamScalars<T>& h) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return adam_loop_avx512<T>(p, g, m, v, n, h);
        case SimdLevel::avx2: return adam_loop_avx2<T>(p, g, m, v, n, h);
        default: break;
    }
#endif
    adam_loop<T>(p, g, m, v, n, h);
}

template <class T>
T* at(void* base, std::int64_t begin) {
    return base ? static_cast<T*>(base) + begin : nullptr;
}

// n elements of one tensor from `begin`, with the scalars rounded to its dtype T.
template <class T>
void typed_span(const StepJob& j, std::int64_t begin, std::int64_t n, const MtaSgdScalars<double>& h) {
    sgd_span<T>(at<T>(j.p, begin), static_cast<const T*>(j.g) + begin, at<T>(j.s0, begin), n,
                MtaSgdScalars<T>::from(h));
}

template <class T>
void typed_span(const StepJob& j, std::int64_t begin, std::int64_t n, const MtaAdamScalars<double>& h) {
    adam_span<T>(at<T>(j.p, begin), static_cast<const T*>(j.g) + begin, at<T>(j.s0, begin), at<T>(j.s1, begin), n,
                 MtaAdamScalars<T>::from(h));
}

template <class Scalars>
void step_range(const StepJob& j, std::int64_t begin, std::int64_t end, const Scalars& h) {
    if (j.dtype == Dtype::f32) {
        typed_span<float>(j, begin, end - begin, h);
    } else {
        typed_span<double>(j, begin, end - begin, h);
    }
}

// What differs between the two optimizers' bindings: the names of the arrays
// of one tensor (param, grad, then the states), alone and as lists, and
// whether the state may be None (SGD without momentum).
struct StepFamily {
    std::vector<const char*> names;
    std::vector<const char*> lists;
    bool states_optional;
};

bool states_optional(const MtaSgdScalars<double>& h) { return h.momentum == 0.0; }
bool states_optional(const MtaAdamScalars<double>&) { return false; }

// Checks one tensor's arrays in the order of kernels/validation.py: param and
// grad of one float32/float64 dtype and size, C order, then each state (None
// is skipped when the family allows it) of that dtype and size.
StepJob prepare(CallArrays& arrays, const std::vector<py::object>& h, const std::vector<Role>& roles,
                bool optional_states) {
    const char* kernel = arrays.kernel();
    py::array p = arrays.add(h[0], roles[0], true);
    py::array g = arrays.add(h[1], roles[1], false);
    const Dtype d = dtype_of(p);
    if ((d != Dtype::f32 && d != Dtype::f64) || dtype_of(g) != d) {
        raise_type_error(std::string(kernel) + ": " + describe(roles[0], p) + " and " + describe(roles[1], g) +
                         " must share one dtype, float32 or float64");
    }
    require_contiguous(p, kernel, roles[0], true);
    require_contiguous(g, kernel, roles[1], false);
    require_same_size(p, roles[0], g, roles[1], kernel);
    StepJob job{p.mutable_data(), g.data(), nullptr, nullptr, static_cast<std::int64_t>(p.size()), d};
    void** state_data[2] = {&job.s0, &job.s1};
    for (std::size_t k = 2; k < h.size(); ++k) {
        if (optional_states && h[k].is_none()) continue;
        py::array s = arrays.add(h[k], roles[k], true);
        if (dtype_of(s) != d) {
            raise_type_error(std::string(kernel) + ": " + describe(roles[k], s) + " must have the dtype of " +
                             describe(roles[0], p));
        }
        require_contiguous(s, kernel, roles[k], true);
        require_same_size(p, roles[0], s, roles[k], kernel);
        *state_data[k - 2] = s.mutable_data();
    }
    return job;
}

// One call of an optimizer step: `many` when params, grads and each state are
// lists (multi_*), else single arrays. Every array is held until the step is
// done (the GIL is released meanwhile).
template <class Scalars>
void step(const char* kernel, const StepFamily& family, bool many, const std::vector<py::handle>& values,
          py::handle scalars_h) {
    const Scalars h = read_scalars<Scalars>(scalars_h, kernel);
    const bool optional = family.states_optional && states_optional(h);
    if (family.states_optional && !optional && values[2].is_none()) {
        raise_value_error(std::string(kernel) + ": " + (many ? family.lists : family.names)[2] +
                          " is required when momentum != 0");
    }
    CallArrays arrays(kernel);
    std::vector<StepJob> jobs;
    if (!many) {
        std::vector<py::object> items;
        for (py::handle v : values) items.push_back(py::reinterpret_borrow<py::object>(v));
        jobs.push_back(prepare(arrays, items, std::vector<Role>(family.names.begin(), family.names.end()), optional));
    } else {
        std::vector<std::pair<std::string, py::handle>> named;
        for (std::size_t k = 0; k < values.size(); ++k) {
            if (!(optional && k >= 2 && values[k].is_none())) named.emplace_back(family.lists[k], values[k]);
        }
        const std::vector<py::sequence> lists = require_lists(kernel, named);
        std::vector<py::object> items(values.size());
        std::vector<Role> roles(family.lists.begin(), family.lists.end());
        for (std::size_t i = 0; i < lists[0].size(); ++i) {
            for (std::size_t k = 0; k < values.size(); ++k) {
                items[k] = k < lists.size() ? py::object(lists[k][i]) : py::object(py::none());
                roles[k].index = static_cast<std::ptrdiff_t>(i);
            }
            jobs.push_back(prepare(arrays, items, roles, optional));
        }
    }
    arrays.require_disjoint();

    std::vector<std::pair<std::int32_t, std::int64_t>> chunks;
    std::int64_t total = 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        for (std::int64_t b = 0; b < jobs[j].size; b += MTA_CHUNK_SIZE) chunks.emplace_back(std::int32_t(j), b);
        total += jobs[j].size;
    }
    std::optional<py::gil_scoped_release> nogil;
    if (total >= 4096) nogil.emplace();
    for_each_task(static_cast<std::int64_t>(chunks.size()), total, [&](std::int64_t c) {
        const StepJob& job = jobs[chunks[c].first];
        const std::int64_t begin = chunks[c].second;
        step_range(job, begin, std::min<std::int64_t>(job.size, begin + MTA_CHUNK_SIZE), h);
        return false;
    });
}

}  // namespace

void bind_optimizer_steps(py::module_& m) {
    static const StepFamily sgd{{"param", "grad", "momentum_buf"}, {"params", "grads", "momentum_bufs"}, true};
    static const StepFamily adam{
        {"param", "grad", "exp_avg", "exp_avg_sq"}, {"params", "grads", "exp_avgs", "exp_avg_sqs"}, false};
    m.def(
        "sgd_momentum_step",
        [](py::handle param, py::handle grad, py::handle buf, py::handle scalars) {
            step<MtaSgdScalars<double>>("sgd_momentum_step", sgd, false, {param, grad, buf}, scalars);
        },
        py::arg("param"), py::arg("grad"), py::arg("momentum_buf"), py::arg("scalars"),
        R"doc(One SGD(-momentum) step in place, PyTorch semantics; scalars: an SgdScalars from the host.)doc");
    m.def(
        "multi_sgd_momentum_step",
        [](py::handle params, py::handle grads, py::handle bufs, py::handle scalars) {
            step<MtaSgdScalars<double>>("multi_sgd_momentum_step", sgd, true, {params, grads, bufs}, scalars);
        },
        py::arg("params"), py::arg("grads"), py::arg("momentum_bufs"), py::arg("scalars"),
        R"doc(sgd_momentum_step over lists, in one call.)doc");
    m.def(
        "adamw_step",
        [](py::handle param, py::handle grad, py::handle exp_avg, py::handle exp_avg_sq, py::handle scalars) {
            step<MtaAdamScalars<double>>("adamw_step", adam, false, {param, grad, exp_avg, exp_avg_sq}, scalars);
        },
        py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("scalars"),
        R"doc(One AdamW (or Adam-L2) step in place; scalars: an AdamScalars from the host.)doc");
    m.def(
        "multi_adamw_step",
        [](py::handle params, py::handle grads, py::handle exp_avgs, py::handle exp_avg_sqs, py::handle scalars) {
            step<MtaAdamScalars<double>>("multi_adamw_step", adam, true, {params, grads, exp_avgs, exp_avg_sqs},
                                         scalars);
        },
        py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("scalars"),
        R"doc(adamw_step over lists, in one call.)doc");
}

}  // namespace minitorch_accum

// Native fused optimizer steps (SGD-momentum, AdamW) over NumPy buffers.
//
// The scalars arrive as Python floats already derived on the host
// (kernels/hyperparameters.py) and are rounded here once to the parameter
// dtype, exactly as the NumPy reference and the CUDA launch path round them.
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

// Parameter, gradient and up to two state arrays of one tensor.
struct StepJob {
    void* p;
    const void* g;
    void* s0;  // momentum buffer / exp_avg
    void* s1;  // exp_avg_sq
    std::int64_t size;
    Dtype dtype;
};

struct SgdHost {
    double lr, momentum, dampening_complement, weight_decay, grad_scale;
    bool nesterov, first_step;

    template <class T>
    MtaSgdScalars<T> rounded() const {
        return MtaSgdScalars<T>{T(lr), T(momentum), T(dampening_complement), T(weight_decay), T(grad_scale),
                                nesterov ? 1 : 0, first_step ? 1 : 0};
    }
};

struct AdamHost {
    double decay, weight_decay, beta1, beta1_complement, beta2, beta2_complement, step_size,
        bias_correction2_sqrt, eps, grad_scale;
    bool decoupled;

    template <class T>
    MtaAdamScalars<T> rounded() const {
        return MtaAdamScalars<T>{T(decay), T(weight_decay), T(beta1), T(beta1_complement), T(beta2),
                                 T(beta2_complement), T(step_size), T(bias_correction2_sqrt), T(eps),
                                 T(grad_scale), decoupled ? 1 : 0};
    }
};

template <class T>
void sgd_span(T* __restrict p, const T* __restrict g, T* __restrict buf, std::int64_t n,
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
void adam_span(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, std::int64_t n,
               const MtaAdamScalars<T>& h) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) mta_adam_update(p[i], g[i], m[i], v[i], h);
}

template <class T>
T* at(void* base, std::int64_t begin) {
    return base ? static_cast<T*>(base) + begin : nullptr;
}

void sgd_range(const StepJob& j, std::int64_t begin, std::int64_t end, const SgdHost& h) {
    if (j.dtype == Dtype::f32) {
        sgd_span<float>(at<float>(j.p, begin), static_cast<const float*>(j.g) + begin, at<float>(j.s0, begin),
                        end - begin, h.rounded<float>());
    } else {
        sgd_span<double>(at<double>(j.p, begin), static_cast<const double*>(j.g) + begin, at<double>(j.s0, begin),
                         end - begin, h.rounded<double>());
    }
}

void adam_range(const StepJob& j, std::int64_t begin, std::int64_t end, const AdamHost& h) {
    if (j.dtype == Dtype::f32) {
        adam_span<float>(at<float>(j.p, begin), static_cast<const float*>(j.g) + begin, at<float>(j.s0, begin),
                         at<float>(j.s1, begin), end - begin, h.rounded<float>());
    } else {
        adam_span<double>(at<double>(j.p, begin), static_cast<const double*>(j.g) + begin,
                          at<double>(j.s0, begin), at<double>(j.s1, begin), end - begin, h.rounded<double>());
    }
}

// Checks one tensor's arrays: a shared float32/float64 dtype, one size, C order.
StepJob prepare(const char* kernel, py::handle p_h, py::handle g_h, py::handle s0_h, py::handle s1_h,
                const std::string& p_role, const std::string& g_role, const std::string& s0_role,
                const std::string& s1_role, bool needs_s0, bool needs_s1) {
    py::array p = require_array(p_h, kernel, p_role);
    py::array g = require_array(g_h, kernel, g_role);
    const Dtype d = dtype_of(p);
    if ((d != Dtype::f32 && d != Dtype::f64) || dtype_of(g) != d) {
        raise_type_error(std::string(kernel) + ": " + describe(p_role, p) + " and " + describe(g_role, g) +
                         " must share one dtype, float32 or float64");
    }
    require_contiguous(p, kernel, p_role, true);
    require_contiguous(g, kernel, g_role, false);
    require_same_size(p, p_role, g, g_role, kernel);
    StepJob job{p.mutable_data(), g.data(), nullptr, nullptr, static_cast<std::int64_t>(p.size()), d};
    const auto state = [&](py::handle h, const std::string& role, bool needed) -> void* {
        if (h.is_none()) {
            if (needed) {
                const bool momentum = role.find("momentum") != std::string::npos;
                raise_value_error(std::string(kernel) + ": " + role + " is required" +
                                  (momentum ? " when momentum != 0" : ""));
            }
            return nullptr;
        }
        py::array s = require_array(h, kernel, role);
        if (dtype_of(s) != d) {
            raise_type_error(std::string(kernel) + ": " + describe(role, s) + " must have the dtype of " +
                             describe(p_role, p));
        }
        require_contiguous(s, kernel, role, true);
        require_same_size(p, p_role, s, role, kernel);
        return s.mutable_data();
    };
    job.s0 = state(s0_h, s0_role, needs_s0);
    job.s1 = needs_s1 ? state(s1_h, s1_role, true) : nullptr;
    return job;
}

template <class Range>
void run_jobs(const std::vector<StepJob>& jobs, Range range) {
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
        range(job, begin, std::min<std::int64_t>(job.size, begin + MTA_CHUNK_SIZE));
        return false;
    });
}

std::vector<py::handle> items(py::handle h, const char* kernel, const char* role, bool optional,
                              std::size_t n) {
    if (optional && h.is_none()) return std::vector<py::handle>(n, py::none());
    const py::sequence seq = require_list(h, kernel, role);
    if (seq.size() != n) {
        raise_value_error(std::string(kernel) + ": params and " + role + " must have the same length, got " +
                          std::to_string(n) + " and " + std::to_string(seq.size()));
    }
    std::vector<py::handle> out;
    out.reserve(n);
    for (py::handle x : seq) out.push_back(x);
    return out;
}

}  // namespace

void bind_optimizer_steps(py::module_& m) {
    m.def(
        "sgd_momentum_step",
        [](py::handle param, py::handle grad, py::handle buf, double lr, double momentum,
           double dampening_complement, double weight_decay, double grad_scale, bool nesterov, bool first_step) {
            const char* kernel = "sgd_momentum_step";
            const SgdHost h{lr, momentum, dampening_complement, weight_decay, grad_scale, nesterov, first_step};
            const std::vector<StepJob> jobs{prepare(kernel, param, grad, buf, py::none(), "param", "grad",
                                                    "momentum_buf", "", momentum != 0.0, false)};
            run_jobs(jobs, [&h](const StepJob& j, std::int64_t b, std::int64_t e) { sgd_range(j, b, e, h); });
        },
        py::arg("param"), py::arg("grad"), py::arg("momentum_buf"), py::arg("lr"), py::arg("momentum"),
        py::arg("dampening_complement"), py::arg("weight_decay"), py::arg("grad_scale"), py::arg("nesterov"),
        py::arg("first_step"),
        R"doc(One SGD(-momentum) step in place, PyTorch semantics; scalars prepared by the host.)doc");

    m.def(
        "multi_sgd_momentum_step",
        [](py::handle params, py::handle grads, py::handle bufs, double lr, double momentum,
           double dampening_complement, double weight_decay, double grad_scale, bool nesterov, bool first_step) {
            const char* kernel = "multi_sgd_momentum_step";
            const SgdHost h{lr, momentum, dampening_complement, weight_decay, grad_scale, nesterov, first_step};
            const py::sequence ps = require_list(params, kernel, "params");
            const auto gs = items(grads, kernel, "grads", false, ps.size());
            const auto bs = items(bufs, kernel, "momentum_bufs", momentum == 0.0, ps.size());
            std::vector<StepJob> jobs;
            for (std::size_t i = 0; i < ps.size(); ++i) {
                jobs.push_back(prepare(kernel, ps[i], gs[i], bs[i], py::none(), indexed("params", i),
                                       indexed("grads", i), indexed("momentum_bufs", i), "", momentum != 0.0,
                                       false));
            }
            run_jobs(jobs, [&h](const StepJob& j, std::int64_t b, std::int64_t e) { sgd_range(j, b, e, h); });
        },
        py::arg("params"), py::arg("grads"), py::arg("momentum_bufs"), py::arg("lr"), py::arg("momentum"),
        py::arg("dampening_complement"), py::arg("weight_decay"), py::arg("grad_scale"), py::arg("nesterov"),
        py::arg("first_step"), R"doc(sgd_momentum_step over lists, in one call.)doc");

    m.def(
        "adamw_step",
        [](py::handle param, py::handle grad, py::handle exp_avg, py::handle exp_avg_sq, double decay,
           double weight_decay, double beta1, double beta1_complement, double beta2, double beta2_complement,
           double step_size, double bias_correction2_sqrt, double eps, double grad_scale, bool decoupled) {
            const char* kernel = "adamw_step";
            const AdamHost h{decay,     weight_decay,          beta1, beta1_complement, beta2, beta2_complement,
                             step_size, bias_correction2_sqrt, eps,   grad_scale,       decoupled};
            const std::vector<StepJob> jobs{prepare(kernel, param, grad, exp_avg, exp_avg_sq, "param", "grad",
                                                    "exp_avg", "exp_avg_sq", true, true)};
            run_jobs(jobs, [&h](const StepJob& j, std::int64_t b, std::int64_t e) { adam_range(j, b, e, h); });
        },
        py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"), py::arg("decay"),
        py::arg("weight_decay"), py::arg("beta1"), py::arg("beta1_complement"), py::arg("beta2"),
        py::arg("beta2_complement"), py::arg("step_size"), py::arg("bias_correction2_sqrt"), py::arg("eps"),
        py::arg("grad_scale"), py::arg("decoupled"),
        R"doc(One AdamW (or Adam-L2) step in place; scalars prepared by the host.)doc");

    m.def(
        "multi_adamw_step",
        [](py::handle params, py::handle grads, py::handle exp_avgs, py::handle exp_avg_sqs, double decay,
           double weight_decay, double beta1, double beta1_complement, double beta2, double beta2_complement,
           double step_size, double bias_correction2_sqrt, double eps, double grad_scale, bool decoupled) {
            const char* kernel = "multi_adamw_step";
            const AdamHost h{decay,     weight_decay,          beta1, beta1_complement, beta2, beta2_complement,
                             step_size, bias_correction2_sqrt, eps,   grad_scale,       decoupled};
            const py::sequence ps = require_list(params, kernel, "params");
            const auto gs = items(grads, kernel, "grads", false, ps.size());
            const auto ms = items(exp_avgs, kernel, "exp_avgs", false, ps.size());
            const auto vs = items(exp_avg_sqs, kernel, "exp_avg_sqs", false, ps.size());
            std::vector<StepJob> jobs;
            for (std::size_t i = 0; i < ps.size(); ++i) {
                jobs.push_back(prepare(kernel, ps[i], gs[i], ms[i], vs[i], indexed("params", i), indexed("grads", i),
                                       indexed("exp_avgs", i), indexed("exp_avg_sqs", i), true, true));
            }
            run_jobs(jobs, [&h](const StepJob& j, std::int64_t b, std::int64_t e) { adam_range(j, b, e, h); });
        },
        py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"), py::arg("decay"),
        py::arg("weight_decay"), py::arg("beta1"), py::arg("beta1_complement"), py::arg("beta2"),
        py::arg("beta2_complement"), py::arg("step_size"), py::arg("bias_correction2_sqrt"), py::arg("eps"),
        py::arg("grad_scale"), py::arg("decoupled"), R"doc(adamw_step over lists, in one call.)doc");
}

}  // namespace minitorch_accum

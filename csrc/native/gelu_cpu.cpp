// Native GELU (erf and tanh forms), forward and backward: the element math of
// fused_math.cuh, in the stored dtype (float32 in float32 SIMD: 16 lanes to an AVX-512
// register), in loops the compiler vectorizes (SSE2, AVX2, AVX-512 variants), spread
// over the native thread pool, GIL released for large arrays.
#include <cstdint>
#include <optional>

#include "fused_math.cuh"
#include "native/bindings.h"
#include "native/fused_args.h"
#include "native/parallel.h"
#include "native/simd.h"

namespace minitorch_accum {

namespace {

template <class T, bool TANH>
MTA_ALWAYS_INLINE inline void gelu_forward_loop(const T* __restrict x, T* __restrict y, std::int64_t n) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) y[i] = mta_gelu_forward_element<T, TANH>(x[i]);
}

template <class T, bool TANH>
MTA_ALWAYS_INLINE inline void gelu_backward_loop(const T* __restrict x, const T* __restrict g, T* __restrict y,
                                                 std::int64_t n) {
#pragma omp simd
    for (std::int64_t i = 0; i < n; ++i) y[i] = mta_gelu_backward_element<T, TANH>(x[i], g[i]);
}

// The polynomials are compute-bound: AVX-512 runs 16 floats (8 doubles) per operation.
MTA_SIMD_CLONES(gelu_forward_loop, (class T, bool TANH), (T, TANH), (const T* x, T* y, std::int64_t n), (x, y, n))
MTA_SIMD_CLONES(gelu_backward_loop, (class T, bool TANH), (T, TANH), (const T* x, const T* g, T* y, std::int64_t n),
                (x, g, y, n))

// g null: the forward.
template <class T, bool TANH>
void gelu_span(const T* x, const T* g, T* y, std::int64_t n) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512:
            return g ? gelu_backward_loop_avx512<T, TANH>(x, g, y, n) : gelu_forward_loop_avx512<T, TANH>(x, y, n);
        case SimdLevel::avx2:
            return g ? gelu_backward_loop_avx2<T, TANH>(x, g, y, n) : gelu_forward_loop_avx2<T, TANH>(x, y, n);
        default: break;
    }
#endif
    return g ? gelu_backward_loop<T, TANH>(x, g, y, n) : gelu_forward_loop<T, TANH>(x, y, n);
}

template <class T>
void gelu_typed(const void* x, const void* g, void* y, std::int64_t n, bool tanh) {
    const auto* xs = static_cast<const T*>(x);
    const auto* gs = static_cast<const T*>(g);
    auto* ys = static_cast<T*>(y);
    for_each_span(n, [&](std::int64_t begin, std::int64_t end) {
        const T* gb = gs ? gs + begin : nullptr;
        if (tanh) {
            gelu_span<T, true>(xs + begin, gb, ys + begin, end - begin);
        } else {
            gelu_span<T, false>(xs + begin, gb, ys + begin, end - begin);
        }
        return false;
    });
}

void gelu(const char* kernel, bool backward, py::handle x, py::handle grad, py::handle out, bool tanh) {
    const FusedArgs args = backward ? FusedArgs(kernel, {{"x", x, false}, {"grad", grad, false}, {"out", out, true}},
                                                {"x", "grad", "out"})
                                    : FusedArgs(kernel, {{"x", x, false}, {"out", out, true}}, {"x", "out"});
    std::vector<py::ssize_t> shape(args["x"].shape(), args["x"].shape() + args["x"].ndim());
    if (backward) args.shape("grad", shape, "x");
    args.shape("out", shape, "x");
    args.disjoint();
    const std::int64_t n = static_cast<std::int64_t>(args["x"].size());
    std::optional<py::gil_scoped_release> nogil;
    if (n >= 4096) nogil.emplace();
    if (args.dtype() == Dtype::f32) {
        gelu_typed<float>(args.data("x"), args.data("grad"), args.mutable_data("out"), n, tanh);
    } else {
        gelu_typed<double>(args.data("x"), args.data("grad"), args.mutable_data("out"), n, tanh);
    }
}

template <class T>
void erf_values(const T* x, T* out, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = MtaNarrow<T>::from(mta_erf(mta_widen<double>(x[i])));
}

}  // namespace

void bind_gelu(py::module_& m) {
    m.def(
        "erf",
        [](py::handle x, py::handle out) {
            const FusedArgs args("erf", {{"x", x, false}, {"out", out, true}}, {"x", "out"});
            args.shape("out", std::vector<py::ssize_t>(args["x"].shape(), args["x"].shape() + args["x"].ndim()), "x");
            args.disjoint();
            const auto n = static_cast<std::int64_t>(args["x"].size());
            if (args.dtype() == Dtype::f32) {
                erf_values(static_cast<const float*>(args.data("x")), static_cast<float*>(args.mutable_data("out")), n);
            } else {
                erf_values(static_cast<const double*>(args.data("x")), static_cast<double*>(args.mutable_data("out")),
                           n);
            }
        },
        py::arg("x"), py::arg("out"),
        R"doc(out = erf(x), the error function the float64 GELU kernels use (float64 inside, rounded once to x's
dtype): exposed for its accuracy test.)doc");
    m.def(
        "gelu_forward", [](py::handle x, py::handle out, bool tanh) { gelu("gelu_forward", false, x, py::none(), out, tanh); },
        py::arg("x"), py::arg("out"), py::arg("tanh"),
        R"doc(out = gelu(x) (erf form, or tanh form when tanh), computed in x's dtype (8 B/elem fp32).)doc");
    m.def(
        "gelu_backward",
        [](py::handle x, py::handle grad, py::handle out, bool tanh) {
            gelu("gelu_backward", true, x, grad, out, tanh);
        },
        py::arg("x"), py::arg("grad"), py::arg("out"), py::arg("tanh"),
        R"doc(out = grad * gelu'(x), computed in x's dtype (12 B/elem fp32).)doc");
}

}  // namespace minitorch_accum

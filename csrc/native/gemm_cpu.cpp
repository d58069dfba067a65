// GEMM for the native pool: C = alpha op(A) op(B) + beta C, row-major. float32 products run on
// the GEMM of our own (sgemm_cpu.cpp: one summation order for every element, so the same bits at
// any thread count, on any vector instruction set and under either OpenBLAS kernel; its tasks
// split C over the pool). float64 products are one single-threaded call of the BLAS NumPy loaded
// (its cblas_dgemm, whose address backend/blas.py registers), never cut. A weight gradient's
// product may run on a pool helper (gemm_start) while the caller computes the input gradient's.
//
// Why not let OpenBLAS thread itself: a micro-batch alternates GEMMs with the fused kernels,
// and two pools then take turns on the second core. OpenBLAS's worker spins (yielding) for
// ~0.1 s after each GEMM, the native pool's helper for 1 ms after each kernel; with both
// waiting for the same core, a transformer micro-batch took as long with 2 threads as with 1
// (issue 27). OpenBLAS is kept at 1 thread (backend/threads.py), as it is for calls from threads.
//
// Why a BLAS call is never cut: the bits of a part of C depend on the part. Measured on NumPy's
// OpenBLAS 0.3.31 in float32 (2026-12-04): under OPENBLAS_CORETYPE=Haswell (the AMD machines'
// setting), cutting the rows of C into two calls at any multiple of 48, 96, 192, 384 or 768 gave
// other bits than one call for most of the models' shapes (246 of 440 cuts at multiples of 48;
// 8 of 22 at 768), every cut of the columns too; under SkylakeX a cut leaving a block small
// enough for OpenBLAS's small-matrix kernel did (256 x 512 x 64 at row 240). The float32 GEMM
// was then such calls cut by rows, and a window of the char transformer with 512-row
// micro-batches (b = 16) got other gradients with 2 threads than with 1. The two kernels also
// give each other's products other bits, so a float32 run on an AMD machine (Haswell) and on the
// Xeon (SkylakeX) drifted apart; sgemm_cpu.cpp ends both. tests/kernels/test_kernel_gemm.py and
// test_kernel_sgemm.py check 1 to 4 threads under both kernels, products in the background included.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "native/array_args.h"
#include "native/bindings.h"
#include "native/parallel.h"
#include "native/sgemm.h"

namespace minitorch_accum {

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

template <class T>
using CblasGemm = void (*)(int, int, int, std::int64_t, std::int64_t, std::int64_t, T, const T*, std::int64_t,
                           const T*, std::int64_t, T, T*, std::int64_t);

std::atomic<CblasGemm<float>> sgemm{nullptr};
std::atomic<CblasGemm<double>> dgemm{nullptr};

// Products smaller than this run on the caller even when gemm_start could hand them over (a
// helper takes microseconds to wake; 2^18 multiply-adds take ~5 us on one AVX-512 core).
constexpr std::int64_t kBackgroundMinMultiplyAdds = std::int64_t(1) << 18;

template <class T>
struct GemmJob {
    CblasGemm<T> call;
    bool trans_a, trans_b;
    std::int64_t m, n, k, lda, ldb;
    T alpha, beta;
    const T* a;
    const T* b;
    T* c;
};

template <class T>
void call_gemm(const GemmJob<T>& j) {
    const int ta = j.trans_a ? kTrans : kNoTrans, tb = j.trans_b ? kTrans : kNoTrans;
    j.call(kRowMajor, ta, tb, j.m, j.n, j.k, j.alpha, j.a, j.lda, j.b, j.ldb, j.beta, j.c, j.n);
}

// One product: float64 one BLAS call; float32 our own, the pool's helpers joining when `parallel`
// and the product is large enough to pay for waking them.
void compute(const GemmJob<double>& j, bool) { call_gemm(j); }
void compute(const SgemmJob& j, bool parallel) {
    run_sgemm(j, parallel && j.m * j.n * j.k >= kBackgroundMinMultiplyAdds);
}

// A product on the calling thread (and free helpers), the GIL released unless it is tiny.
template <class Job>
void run_gemm(const Job& j) {
    std::optional<py::gil_scoped_release> nogil;
    if (j.m * j.n * j.k >= 4096) nogil.emplace();
    compute(j, true);
}

// A GEMM handed to a pool helper while the caller goes on (a weight gradient's GEMM, while the
// caller computes the input gradient's and the layers below it): the same one call of the BLAS
// (the same bits), its arrays held until gemm_finish. One at a time.
struct BackgroundGemm {
    bool running = false;
    Dtype dtype = Dtype::f32;
    SgemmJob f32{};
    GemmJob<double> f64{};
    py::object held[3];
};

BackgroundGemm& background_gemm() {
    static BackgroundGemm* state = new BackgroundGemm();  // never destroyed: no exit-time race
    return *state;
}

bool run_background_gemm(void* context, std::int64_t) {
    auto* state = static_cast<BackgroundGemm*>(context);
    if (state->dtype == Dtype::f32) {
        compute(state->f32, false);  // the helper is the one thread it has
    } else {
        compute(state->f64, false);
    }
    return false;
}

void gemm_finish() {
    BackgroundGemm& state = background_gemm();
    if (!state.running) return;
    {
        py::gil_scoped_release nogil;
        finish_background();
    }
    state.running = false;
    for (auto& h : state.held) h = py::object();
}

// The dtype of a product's out (float32 or float64), which a and b must have too.
Dtype product_dtype(const char* kernel, const py::array& a, const py::array& b, const py::array& out) {
    const Dtype dtype = dtype_of(out);
    if (dtype != Dtype::f32 && dtype != Dtype::f64) {
        raise_type_error(std::string(kernel) + ": unsupported dtype " + describe(Role("out"), out) +
                         "; supported: float32, float64");
    }
    for (const auto& [role, x] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
        if (dtype_of(*x) != dtype) {
            raise_type_error(std::string(kernel) + ": " + describe(Role(role), *x) + " must have the dtype of " +
                             describe(Role("out"), out));
        }
    }
    return dtype;
}

void gemm_call(py::handle a_handle, bool trans_a, py::handle b_handle, bool trans_b, py::handle out_handle,
               double alpha, double beta, py::handle bias_handle, bool background, bool* started) {
    const char* kernel = "gemm";
    CallArrays arrays(kernel);
    const py::array a = arrays.add(a_handle, Role("a"), false);
    const py::array b = arrays.add(b_handle, Role("b"), false);
    const py::array out = arrays.add(out_handle, Role("out"), true);
    const Dtype dtype = product_dtype(kernel, a, b, out);
    const bool has_bias = !bias_handle.is_none();
    py::array bias;  // a default py::array is an empty array, not nothing: has_bias says
    if (has_bias) {  // a Linear's bias row, added to every row of out by the float32 GEMM
        bias = arrays.add(bias_handle, Role("bias"), false);
        if (dtype != Dtype::f32 || dtype_of(bias) != Dtype::f32) {
            raise_type_error(std::string(kernel) + ": a bias row needs a float32 product and a float32 bias, got " +
                             describe(Role("bias"), bias) + " for " + describe(Role("out"), out));
        }
        if (bias.ndim() != 1 || out.ndim() != 2 || bias.shape(0) != out.shape(1)) {
            raise_value_error(std::string(kernel) + ": " + describe(Role("bias"), bias) +
                              " must be one row of " + describe(Role("out"), out));
        }
        require_contiguous(bias, kernel, Role("bias"), false);
    }
    for (const auto& [role, x] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
        if (x->ndim() != 2) raise_value_error(std::string(kernel) + ": " + describe(Role(role), *x) + " must have 2 axes");
        require_contiguous(*x, kernel, Role(role), false);
    }
    if (out.ndim() != 2) raise_value_error(std::string(kernel) + ": " + describe(Role("out"), out) + " must have 2 axes");
    require_contiguous(out, kernel, Role("out"), true);
    const std::int64_t m = out.shape(0), n = out.shape(1);
    const std::int64_t am = trans_a ? a.shape(1) : a.shape(0), k = trans_a ? a.shape(0) : a.shape(1);
    const std::int64_t bk = trans_b ? b.shape(1) : b.shape(0), bn = trans_b ? b.shape(0) : b.shape(1);
    if (am != m || bk != k || bn != n) {
        raise_value_error(std::string(kernel) + ": op(a) is " + std::to_string(am) + " x " + std::to_string(k) +
                          ", op(b) " + std::to_string(bk) + " x " + std::to_string(bn) + ": they do not make " +
                          describe(Role("out"), out));
    }
    arrays.require_disjoint();
    if (m == 0 || n == 0) return;
    // the job is built here and copied into the background's state only when it starts: a GEMM
    // the caller runs while one is in the background must not touch that one's job
    SgemmJob f32{};
    GemmJob<double> f64{};
    if (dtype == Dtype::f32) {
        f32 = SgemmJob{trans_a, trans_b, m, n, k, a.shape(1), b.shape(1), n, static_cast<float>(alpha),
                       static_cast<float>(beta), static_cast<const float*>(a.data()),
                       static_cast<const float*>(b.data()),
                       static_cast<float*>(const_cast<py::array&>(out).mutable_data()),
                       has_bias ? static_cast<const float*>(bias.data()) : nullptr};
    } else {
        const CblasGemm<double> call = dgemm.load();
        if (call == nullptr) raise_value_error("gemm: no BLAS is registered (register_blas_gemm)");
        f64 = GemmJob<double>{call, trans_a, trans_b, m, n, k, a.shape(1), b.shape(1), alpha, beta,
                              static_cast<const double*>(a.data()), static_cast<const double*>(b.data()),
                              static_cast<double*>(const_cast<py::array&>(out).mutable_data())};
    }
    // a product too small to pay for the hand-over (a helper takes microseconds to wake) runs here
    if (background && !has_bias && m * n * k >= kBackgroundMinMultiplyAdds) {  // gemm_start finished the last one
        BackgroundGemm& state = background_gemm();
        state.f32 = f32;
        state.f64 = f64;
        state.dtype = dtype;
        if (start_background(run_background_gemm, &state)) {
            state.running = true;
            state.held[0] = a;
            state.held[1] = b;
            state.held[2] = out;
            *started = true;
            return;
        }
    }
    if (dtype == Dtype::f32) {
        run_gemm(f32);
    } else {
        run_gemm(f64);
    }
}

// A GEMM in the background goes on meanwhile: the caller (accum/arena_store.py) finishes it
// before anything reads or writes what it writes.
void gemm(py::handle a, bool trans_a, py::handle b, bool trans_b, py::handle out, double alpha, double beta,
          py::handle bias) {
    bool started = false;
    gemm_call(a, trans_a, b, trans_b, out, alpha, beta, bias, false, &started);
}

bool gemm_start(py::handle a, bool trans_a, py::handle b, bool trans_b, py::handle out, double alpha, double beta) {
    gemm_finish();
    bool started = false;
    gemm_call(a, trans_a, b, trans_b, out, alpha, beta, py::none(), true, &started);
    return started;
}

// A stack of products out[i] = op(a[i]) op(b[i]): each one a single-threaded call of the
// registered BLAS (the call NumPy's matmul makes for each matrix of a stack), the stack cut over
// the pool by whole matrices, so no thread count changes a bit. NumPy's loop runs on one thread
// and copies an operand whose matrices it cannot hand to BLAS as they are (its q @ k^T of an
// attention, k a slice of the qkv product: 81 us for 128 matrices of 32 x 16 here, against 43
// for the same work with contiguous operands).
template <class T>
struct StackJob {
    CblasGemm<T> call;
    std::int64_t m, n, k;
    const T* a;
    const T* b;
    T* c;
    // per operand: the element offset of matrix i (a walk over the batch axes), its leading
    // dimension and whether it is stored transposed
    const std::int64_t* a_offsets;
    const std::int64_t* b_offsets;
    std::int64_t lda, ldb;
    bool trans_a, trans_b;
    std::int64_t per_task;
    std::int64_t count;
};

// A transposed b is copied row-major first: OpenBLAS (0.3.31, SkylakeX) sends a small
// op(b) = b^T product down its packing path, 2x slower than its small-matrix kernel on the copy
// (attention's q k^T: 82 us for 128 matrices of 32 x 16, 40 us after a 20 us copy, the same bits).
template <class T>
void run_stack_part(const StackJob<T>& j, std::int64_t t) {
    const int ta = j.trans_a ? kTrans : kNoTrans;
    const std::int64_t end = std::min(j.count, (t + 1) * j.per_task);
    if constexpr (std::is_same_v<T, float>) {  // gemm's float32 kernel, each matrix on this thread
        for (std::int64_t i = t * j.per_task; i < end; ++i) {
            run_sgemm(SgemmJob{j.trans_a, j.trans_b, j.m, j.n, j.k, j.lda, j.ldb, j.n, 1.0f, 0.0f,
                               j.a + j.a_offsets[i], j.b + j.b_offsets[i], j.c + i * j.m * j.n},
                      false);
        }
        return;
    }
    std::vector<T> packed(j.trans_b ? static_cast<std::size_t>(j.k * j.n) : 0);
    for (std::int64_t i = t * j.per_task; i < end; ++i) {
        const T* b = j.b + j.b_offsets[i];
        std::int64_t ldb = j.ldb;
        if (j.trans_b) {  // b holds op(b)^T: row c of it is column c of op(b)
            for (std::int64_t c = 0; c < j.n; ++c) {
                for (std::int64_t r = 0; r < j.k; ++r) packed[static_cast<std::size_t>(r * j.n + c)] = b[c * j.ldb + r];
            }
            b = packed.data();
            ldb = j.n;
        }
        j.call(kRowMajor, ta, kNoTrans, j.m, j.n, j.k, T(1), j.a + j.a_offsets[i], j.lda, b, ldb, T(0),
               j.c + i * j.m * j.n, j.n);
    }
}

// How a stack's operand stores each of its (rows x columns) matrices: row-major (unit stride
// along the columns) or transposed (unit stride along the rows), the leading dimension, and
// each matrix's element offset. False when neither stride is one (the caller copies it).
bool stack_layout(const py::array& x, std::int64_t rows, std::int64_t columns, std::vector<std::int64_t>& offsets,
                  std::int64_t& ld, bool& transposed) {
    const py::ssize_t d = x.ndim(), item = x.itemsize();
    const py::ssize_t row_stride = x.strides(d - 2), column_stride = x.strides(d - 1);
    if (row_stride % item != 0 || column_stride % item != 0) return false;
    const std::int64_t rs = row_stride / item, cs = column_stride / item;
    if ((cs == 1 || columns == 1) && rs >= std::max<std::int64_t>(1, columns)) {
        transposed = false;
        ld = rs;
    } else if ((rs == 1 || rows == 1) && cs >= std::max<std::int64_t>(1, rows)) {
        transposed = true;
        ld = cs;
    } else {
        return false;
    }
    std::int64_t count = 1;
    for (py::ssize_t axis = 0; axis < d - 2; ++axis) count *= x.shape(axis);
    offsets.assign(static_cast<std::size_t>(count), 0);
    std::vector<std::int64_t> index(static_cast<std::size_t>(std::max<py::ssize_t>(d - 2, 0)), 0);
    for (std::int64_t i = 0; i < count; ++i) {
        std::int64_t offset = 0;
        for (py::ssize_t axis = 0; axis < d - 2; ++axis) {
            if (x.strides(axis) % item != 0) return false;
            offset += index[static_cast<std::size_t>(axis)] * (x.strides(axis) / item);
        }
        offsets[static_cast<std::size_t>(i)] = offset;
        for (py::ssize_t axis = d - 3; axis >= 0; --axis) {  // the next multi-index, last axis fastest
            if (++index[static_cast<std::size_t>(axis)] < x.shape(axis)) break;
            index[static_cast<std::size_t>(axis)] = 0;
        }
    }
    return true;
}

template <class T>
void run_stack(StackJob<T> j) {
    const std::int64_t work = j.count * j.m * j.n * j.k;
    // whole matrices per task, about 2^17 multiply-adds each (a helper costs microseconds to join)
    j.per_task = std::max<std::int64_t>(1, (std::int64_t(1) << 17) / std::max<std::int64_t>(1, j.m * j.n * j.k));
    const std::int64_t tasks = (j.count + j.per_task - 1) / j.per_task;
    std::optional<py::gil_scoped_release> nogil;
    if (work >= 4096) nogil.emplace();
    const bool parallel = tasks > 1 && work >= (std::int64_t(1) << 18) && !in_forked_child();
    run_tasks(tasks, [](void* context, std::int64_t t) {
        run_stack_part(*static_cast<const StackJob<T>*>(context), t);
        return false;
    }, &j, parallel);
}

// out[i] = a[i] @ b[i] over the leading (batch) axes, which a, b and out share; True when the
// stack ran here, False when an operand's matrices are not BLAS operands as stored (the caller
// then uses NumPy's matmul).
bool stacked_gemm(py::handle a_handle, py::handle b_handle, py::handle out_handle) {
    const char* kernel = "stacked_gemm";
    CallArrays arrays(kernel);
    const py::array a = arrays.add(a_handle, Role("a"), false);
    const py::array b = arrays.add(b_handle, Role("b"), false);
    const py::array out = arrays.add(out_handle, Role("out"), true);
    const Dtype dtype = product_dtype(kernel, a, b, out);
    const py::ssize_t d = out.ndim();
    for (const auto& [role, x] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
        if (x->ndim() != d) {
            raise_value_error(std::string(kernel) + ": " + describe(Role(role), *x) + " must have the axes of " +
                              describe(Role("out"), out));
        }
    }
    if (d < 3) raise_value_error(std::string(kernel) + ": " + describe(Role("out"), out) + " must have 3 axes or more");
    require_contiguous(out, kernel, Role("out"), true);
    for (py::ssize_t axis = 0; axis < d - 2; ++axis) {
        if (a.shape(axis) != out.shape(axis) || b.shape(axis) != out.shape(axis)) {
            raise_value_error(std::string(kernel) + ": the batch axes of " + describe(Role("a"), a) + " and " +
                              describe(Role("b"), b) + " must be those of " + describe(Role("out"), out));
        }
    }
    const std::int64_t m = out.shape(d - 2), n = out.shape(d - 1), k = a.shape(d - 1);
    if (a.shape(d - 2) != m || b.shape(d - 2) != k || b.shape(d - 1) != n) {
        raise_value_error(std::string(kernel) + ": " + describe(Role("a"), a) + " times " + describe(Role("b"), b) +
                          " does not make " + describe(Role("out"), out));
    }
    arrays.require_disjoint();
    std::int64_t count = 1;
    for (py::ssize_t axis = 0; axis < d - 2; ++axis) count *= out.shape(axis);
    if (count == 0 || m == 0 || n == 0) return true;
    if (k == 0) return false;  // NumPy writes the zeros
    std::vector<std::int64_t> a_offsets, b_offsets;
    std::int64_t lda = 0, ldb = 0;
    bool trans_a = false, trans_b = false;
    if (!stack_layout(a, m, k, a_offsets, lda, trans_a) || !stack_layout(b, k, n, b_offsets, ldb, trans_b)) return false;
    if (dtype == Dtype::f32) {
        run_stack(StackJob<float>{nullptr, m, n, k, static_cast<const float*>(a.data()), static_cast<const float*>(b.data()),
                                  static_cast<float*>(const_cast<py::array&>(out).mutable_data()), a_offsets.data(),
                                  b_offsets.data(), lda, ldb, trans_a, trans_b, 1, count});
    } else {
        const CblasGemm<double> call = dgemm.load();
        if (call == nullptr) raise_value_error("stacked_gemm: no BLAS is registered (register_blas_gemm)");
        run_stack(StackJob<double>{call, m, n, k, static_cast<const double*>(a.data()),
                                   static_cast<const double*>(b.data()),
                                   static_cast<double*>(const_cast<py::array&>(out).mutable_data()), a_offsets.data(),
                                   b_offsets.data(), lda, ldb, trans_a, trans_b, 1, count});
    }
    return true;
}

}  // namespace

void bind_gemm(py::module_& m) {
    m.def("gemm_start", &gemm_start, py::arg("a"), py::arg("trans_a"), py::arg("b"), py::arg("trans_b"),
          py::arg("out"), py::arg("alpha"), py::arg("beta"),
          R"doc(gemm's product, handed to a pool helper (on one thread: gemm's bits) while the caller goes on:
True when it was (call gemm_finish before reading out or changing a or b; gemm_start calls it first),
False when it ran here already (one thread, the pool busy, under 2^18 multiply-adds). The arrays are held until
gemm_finish.)doc");
    m.def("gemm_finish", &gemm_finish,
          R"doc(Waits for the GEMM gemm_start handed to a helper and lets its arrays go; nothing when none runs.)doc");
    m.def("stacked_gemm", &stacked_gemm, py::arg("a"), py::arg("b"), py::arg("out"),
          R"doc(out[i] = a[i] @ b[i] over the shared leading axes of a, b and a C-contiguous out (float32 or float64),
whole products cut over the native pool: float32 gemm's own kernel on each, float64 one call of the registered
BLAS (the same bits with any thread count). Returns False, writing nothing, when a's or b's matrices are neither row- nor
column-major with a unit stride (the caller then uses NumPy).)doc");
    m.def(
        "register_blas_gemm",
        [](std::uintptr_t sgemm_address, std::uintptr_t dgemm_address) {
            sgemm.store(reinterpret_cast<CblasGemm<float>>(sgemm_address));
            dgemm.store(reinterpret_cast<CblasGemm<double>>(dgemm_address));
        },
        py::arg("sgemm"), py::arg("dgemm"),
        R"doc(The addresses of the row-major cblas_sgemm and cblas_dgemm (64-bit integers); gemm calls the dgemm.)doc");
    m.def("blas_gemm_registered", []() { return sgemm.load() != nullptr && dgemm.load() != nullptr; },
          R"doc(Whether register_blas_gemm was called.)doc");
    m.def("gemm", &gemm, py::arg("a"), py::arg("trans_a"), py::arg("b"), py::arg("trans_b"), py::arg("out"),
          py::arg("alpha"), py::arg("beta"), py::arg("bias") = py::none(),
          R"doc(out = alpha op(a) op(b) + beta out (op: transposed when trans_*), row-major float32 or float64. float32: the
native GEMM, each element summed in one order (blocks of 256 k, FMA chains from +0, blocks added in order), cut
over the pool; float64: one single-threaded call of the registered BLAS, never cut. The same bits with any
thread count. bias (float32 only): a row of out's width added to every row last, rounded as a separate
addition would round it.)doc");
}

}  // namespace minitorch_accum

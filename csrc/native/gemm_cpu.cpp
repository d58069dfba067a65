// GEMM on the native pool: C = alpha op(A) op(B) + beta C, row-major, cut into blocks of rows of
// C, one per thread, each a single-threaded call of the BLAS NumPy loaded (its cblas_?gemm, whose
// address backend/blas.py registers).
//
// Why not let OpenBLAS thread itself: a micro-batch alternates GEMMs with the fused kernels,
// and two pools then take turns on the second core. OpenBLAS's worker spins (yielding) for
// ~0.1 s after each GEMM, the native pool's helper for 50 us after each kernel; with both
// waiting for the same core, a transformer micro-batch took as long with 2 threads as with 1
// (issue 27). One pool for both means one helper per core, and a helper that is late (another
// process holds its core) costs nothing: the caller takes its block too (thread_pool.cpp).
// OpenBLAS is then kept at 1 thread (backend/threads.py), as it is for calls from threads.
//
// The cut must not change a bit: C is the same with any thread count. Measured on NumPy's
// OpenBLAS 0.3.31 in float32 (float64 was unaffected): under OPENBLAS_CORETYPE=Haswell (the AMD
// machines' setting), whose kernel takes 24 rows at a time, rows cut at multiples of 16 gave
// other bits in 114,000 of 3.4 million elements, and every cut of the columns gave other bits;
// under SkylakeX, small blocks go to the small-matrix kernel, which sums in another order. So: rows
// only, on multiples of 48, at least 2^21 multiply-adds a block; a product too small for two such
// blocks runs on the calling thread (tests/kernels/test_kernel_gemm.py checks 1 to 4 threads under
// both kernels).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "native/array_args.h"
#include "native/bindings.h"
#include "native/parallel.h"

namespace minitorch_accum {

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

template <class T>
using CblasGemm = void (*)(int, int, int, std::int64_t, std::int64_t, std::int64_t, T, const T*, std::int64_t,
                           const T*, std::int64_t, T, T*, std::int64_t);

std::atomic<CblasGemm<float>> sgemm{nullptr};
std::atomic<CblasGemm<double>> dgemm{nullptr};

// A block of a parallel GEMM has at least this many multiply-adds (a helper costs microseconds to
// join, 2^21 take ~15 us on one AVX-512 core; and blocks of 2^20 still came out of SkylakeX's
// small-matrix kernel at 4 threads) and a multiple of this many rows (16 and 24, the row counts of
// the SkylakeX and Haswell sgemm kernels, both divide it).
constexpr std::int64_t kBlockMinMultiplyAdds = std::int64_t(1) << 21;
constexpr std::int64_t kBlockRows = 48;

template <class T>
struct GemmJob {
    CblasGemm<T> call;
    bool trans_a, trans_b;
    std::int64_t m, n, k, lda, ldb, parts;
    T alpha, beta;
    const T* a;
    const T* b;
    T* c;
};

// Rows [begin, end) of block p of m rows in `parts` blocks, cut on multiples of kBlockRows.
std::pair<std::int64_t, std::int64_t> rows_of(std::int64_t m, std::int64_t parts, std::int64_t p) {
    const auto edge = [&](std::int64_t q) { return q >= parts ? m : m * q / parts / kBlockRows * kBlockRows; };
    return {edge(p), edge(p + 1)};
}

template <class T>
void run_part(const GemmJob<T>& j, std::int64_t p) {
    const int ta = j.trans_a ? kTrans : kNoTrans, tb = j.trans_b ? kTrans : kNoTrans;
    const auto [r0, r1] = rows_of(j.m, j.parts, p);  // rows of C are rows of op(A)
    if (r1 <= r0) return;
    const T* a = j.a + (j.trans_a ? r0 : r0 * j.lda);
    j.call(kRowMajor, ta, tb, r1 - r0, j.n, j.k, j.alpha, a, j.lda, j.b, j.ldb, j.beta, j.c + r0 * j.n, j.n);
}

template <class T>
void run_gemm(GemmJob<T> j) {
    const std::int64_t work = j.m * j.n * j.k;
    const std::int64_t fit = std::min(j.m / kBlockRows, work / kBlockMinMultiplyAdds);
    j.parts = in_forked_child() ? 1 : std::max<std::int64_t>(1, std::min<std::int64_t>(thread_limit(), fit));
    std::optional<py::gil_scoped_release> nogil;
    if (work >= 4096) nogil.emplace();
    if (j.parts == 1) return run_part(j, 0);
    run_tasks(j.parts, [](void* context, std::int64_t p) {
        run_part(*static_cast<const GemmJob<T>*>(context), p);
        return false;
    }, &j, true);
}

void gemm(py::handle a_handle, bool trans_a, py::handle b_handle, bool trans_b, py::handle out_handle, double alpha,
          double beta) {
    const char* kernel = "gemm";
    CallArrays arrays(kernel);
    const py::array a = arrays.add(a_handle, Role("a"), false);
    const py::array b = arrays.add(b_handle, Role("b"), false);
    const py::array out = arrays.add(out_handle, Role("out"), true);
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
    if (dtype == Dtype::f32) {
        const CblasGemm<float> call = sgemm.load();
        if (call == nullptr) raise_value_error("gemm: no BLAS is registered (register_blas_gemm)");
        run_gemm(GemmJob<float>{call, trans_a, trans_b, m, n, k, a.shape(1), b.shape(1), 1,
                                static_cast<float>(alpha), static_cast<float>(beta),
                                static_cast<const float*>(a.data()), static_cast<const float*>(b.data()),
                                static_cast<float*>(const_cast<py::array&>(out).mutable_data())});
    } else {
        const CblasGemm<double> call = dgemm.load();
        if (call == nullptr) raise_value_error("gemm: no BLAS is registered (register_blas_gemm)");
        run_gemm(GemmJob<double>{call, trans_a, trans_b, m, n, k, a.shape(1), b.shape(1), 1, alpha, beta,
                                 static_cast<const double*>(a.data()), static_cast<const double*>(b.data()),
                                 static_cast<double*>(const_cast<py::array&>(out).mutable_data())});
    }
}

}  // namespace

void bind_gemm(py::module_& m) {
    m.def(
        "register_blas_gemm",
        [](std::uintptr_t sgemm_address, std::uintptr_t dgemm_address) {
            sgemm.store(reinterpret_cast<CblasGemm<float>>(sgemm_address));
            dgemm.store(reinterpret_cast<CblasGemm<double>>(dgemm_address));
        },
        py::arg("sgemm"), py::arg("dgemm"),
        R"doc(The addresses of the row-major cblas_sgemm and cblas_dgemm (64-bit integers) that gemm calls.)doc");
    m.def("blas_gemm_registered", []() { return sgemm.load() != nullptr && dgemm.load() != nullptr; },
          R"doc(Whether register_blas_gemm was called.)doc");
    m.def("gemm", &gemm, py::arg("a"), py::arg("trans_a"), py::arg("b"), py::arg("trans_b"), py::arg("out"),
          py::arg("alpha"), py::arg("beta"),
          R"doc(out = alpha op(a) op(b) + beta out (op: transposed when trans_*), row-major float32 or float64, cut
over the native pool into one block of rows of out per thread (on multiples of 48 rows, at least 2^21
multiply-adds each: the same bits with any thread count), each a single-threaded call of the registered
BLAS.)doc");
}

}  // namespace minitorch_accum

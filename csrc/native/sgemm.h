// The float32 GEMM of our own (sgemm_cpu.cpp): C = alpha op(A) op(B) + beta C (+ a bias row), row-major.
#pragma once

#include <cstdint>

namespace minitorch_accum {

struct SgemmJob {
    bool trans_a, trans_b;
    std::int64_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float* a;
    const float* b;
    float* c;
    const float* bias = nullptr;  // n floats added to every row of C last (a Linear's bias), or none
};

// Runs the product, its tasks on the native pool when `parallel`: the bits of C are the same
// whatever the thread count, the cut and the vector instruction set (sgemm_cpu.cpp says why).
void run_sgemm(const SgemmJob& job, bool parallel);

}  // namespace minitorch_accum

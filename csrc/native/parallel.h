// How the native kernels split work across OpenMP threads and read their inputs.
#pragma once

#include <algorithm>
#include <cstdint>

#include "accum_math.cuh"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace minitorch_accum {

// How the loops read a stored gradient type: the 16-bit float structs as
// their raw bits, so the compiler sees a plain integer load it can vectorize.
template <class G>
struct StoredAs {
    typedef G type;
    static G value(G x) { return x; }
};
template <>
struct StoredAs<mta_half> {
    typedef mta_u16 type;
    static mta_half value(mta_u16 bits) { return mta_half{bits}; }
};
template <>
struct StoredAs<mta_bfloat16> {
    typedef mta_u16 type;
    static mta_bfloat16 value(mta_u16 bits) { return mta_bfloat16{bits}; }
};

// Below this many elements a kernel runs on the calling thread: waking the
// OpenMP team costs a few microseconds, more than such a pass takes.
constexpr std::int64_t kParallelMinElements = std::int64_t(1) << 15;

// True in a process forked after this module loaded (see fork_safety.cpp).
bool in_forked_child();

// Whether a pass over n elements should wake the OpenMP team.
inline bool use_threads(std::int64_t n) { return n >= kParallelMinElements && !in_forked_child(); }

// Runs body(begin, end) over [0, n), one contiguous span per thread (spans
// start on 16-element boundaries so each keeps the array's SIMD alignment),
// and ORs the spans' results (the non-finite flag).
template <class Body>
bool for_each_span(std::int64_t n, Body body) {
    int found = 0;
#ifdef _OPENMP
#pragma omp parallel if (use_threads(n)) reduction(| : found)
    {
        const std::int64_t threads = omp_get_num_threads();
        const std::int64_t t = omp_get_thread_num();
        const std::int64_t per = (((n + threads - 1) / threads) + 15) & ~std::int64_t(15);
        const std::int64_t begin = std::min(n, t * per);
        const std::int64_t end = std::min(n, begin + per);
        if (begin < end) found |= body(begin, end) ? 1 : 0;
    }
#else
    found = body(std::int64_t(0), n) ? 1 : 0;
#endif
    return found != 0;
}

}  // namespace minitorch_accum

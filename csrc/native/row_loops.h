// Row reductions of the fused native kernels, in the lane order of fused_math.cuh:
// lane l adds elements l, l + 32, ... in order (the compiler keeps the 32 partial sums
// in vector registers), then lane l + w goes into lane l for w = 16, 8, 4, 2, 1. The CUDA
// kernels and the NumPy reference sum in this order too. The sums are in the type the
// value function returns: float for float32 rows (32 lanes in 2 AVX-512 registers),
// double for float64 rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "fused_math.cuh"
#include "native/simd.h"

namespace minitorch_accum {

static_assert(MTA_ROW_LANES == 32, "the combination below is written out for 32 lanes");

// The type value(j) returns: what the row is summed in.
template <class Value>
using RowValue = decltype(std::declval<Value&>()(std::int64_t(0)));

// Lane l + w into lane l for w = 16, 8, 4, 2, 1 (step: the add, or the maximum), in vectors
// (GCC's and Clang's vector extensions: on AVX-512 two 16-float halves, then 256-, 128-bit
// halves): a horizontal reduction in exactly the lane tree's order, instead of 31 scalar
// steps through memory, which cost more than a short row's own arithmetic.
template <class A, int N>
struct LaneVector;
template <int N>
struct LaneVector<float, N> {
    typedef float type __attribute__((vector_size(N * sizeof(float))));
};
template <int N>
struct LaneVector<double, N> {
    typedef double type __attribute__((vector_size(N * sizeof(double))));
};

// low = step(low, high) for the two halves of v.
template <int W, class A, class Step>
MTA_ALWAYS_INLINE inline void fold_lanes(const typename LaneVector<A, 2 * W>::type& v,
                                         typename LaneVector<A, W>::type& low, Step step) {
    typename LaneVector<A, W>::type high;
    __builtin_memcpy(&low, &v, sizeof low);
    __builtin_memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
    step(low, high);
}

template <class A, class Step>
MTA_ALWAYS_INLINE inline A combine_row_lanes(const A* lanes, Step step) {
    typename LaneVector<A, 32>::type all;
    typename LaneVector<A, 16>::type w16;
    typename LaneVector<A, 8>::type w8;
    typename LaneVector<A, 4>::type w4;
    typename LaneVector<A, 2>::type w2;
    __builtin_memcpy(&all, lanes, sizeof all);
    fold_lanes<16, A>(all, w16, step);
    fold_lanes<8, A>(w16, w8, step);
    fold_lanes<4, A>(w8, w4, step);
    fold_lanes<2, A>(w4, w2, step);
    A w1[2];
    __builtin_memcpy(w1, &w2, sizeof w1);
    step(w1[0], w1[1]);
    return w1[0];
}

// a = a + b and a = max(a, b) (NaN skipped: a lane never holds one), on vectors or scalars.
struct AddLanes {
    template <class V>
    MTA_ALWAYS_INLINE void operator()(V& a, const V& b) const { a = a + b; }
};
struct MaxLanes {
    template <class V>
    MTA_ALWAYS_INLINE void operator()(V& a, const V& b) const { a = b > a ? b : a; }
};

// The values of a row's tail [i, n) (fewer than 32 elements, i a multiple of 32): one vector
// step over the row's last 8, 16 or 32 elements (the fewest that hold the tail, all inside
// the row), of which the tail is the end; a row too short for that window computes its
// values one by one.
template <int W, class A, class Value>
MTA_ALWAYS_INLINE inline const A* row_window_values(A* window, std::int64_t n, std::int64_t rest, Value value) {
    const std::int64_t start = n - W;
#pragma omp simd
    for (int l = 0; l < W; ++l) window[l] = value(start + l);
    return window + (W - rest);
}

template <class A, class Value>
MTA_ALWAYS_INLINE inline const A* row_tail_values(A* window, std::int64_t i, std::int64_t n, Value value) {
    const std::int64_t rest = n - i;
    if (rest <= 8 && n >= 8) return row_window_values<8>(window, n, rest, value);
    if (rest <= 16 && n >= 16) return row_window_values<16>(window, n, rest, value);
    if (n >= MTA_ROW_LANES) return row_window_values<MTA_ROW_LANES>(window, n, rest, value);
    for (std::int64_t j = i; j < n; ++j) window[j - i] = value(j);
    return window;
}

// Adds value(j) for the row's elements j into their lanes (step: the add, or the maximum).
template <class A, class Step, class Value>
MTA_ALWAYS_INLINE inline void row_lane_pass(A* lanes, std::int64_t n, Value value, Step step) {
    std::int64_t i = 0;
    for (; i + MTA_ROW_LANES <= n; i += MTA_ROW_LANES) {
#pragma omp simd
        for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = step(lanes[l], value(i + l));
    }
    if (i < n) {
        A window[MTA_ROW_LANES];
        const A* tail = row_tail_values(window, i, n, value);
        for (std::int64_t l = 0; l < n - i; ++l) lanes[l] = step(lanes[l], tail[l]);
    }
}

// The sum of value(j) over j in [0, n).
template <class Value, class A = RowValue<Value>>
MTA_ALWAYS_INLINE inline A row_lane_sum(std::int64_t n, Value value) {
    A lanes[MTA_ROW_LANES];
    for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = A(0);
    row_lane_pass(lanes, n, value, [](A a, A v) { return mta_add(a, v); });
    return combine_row_lanes(lanes, AddLanes{});
}

// The sums of first(j) and second(j) in one pass (each in the order of row_lane_sum).
template <class First, class Second, class A = RowValue<First>>
MTA_ALWAYS_INLINE inline void row_lane_sums(std::int64_t n, First first, Second second, A& a, A& b) {
    A lanes_a[MTA_ROW_LANES];
    A lanes_b[MTA_ROW_LANES];
    for (int l = 0; l < MTA_ROW_LANES; ++l) lanes_a[l] = lanes_b[l] = A(0);
    std::int64_t i = 0;
    for (; i + MTA_ROW_LANES <= n; i += MTA_ROW_LANES) {
#pragma omp simd
        for (int l = 0; l < MTA_ROW_LANES; ++l) {
            lanes_a[l] = mta_add(lanes_a[l], first(i + l));
            lanes_b[l] = mta_add(lanes_b[l], second(i + l));
        }
    }
    if (i < n) {
        A window_a[MTA_ROW_LANES];
        A window_b[MTA_ROW_LANES];
        const A* tail_a = row_tail_values(window_a, i, n, first);
        const A* tail_b = row_tail_values(window_b, i, n, second);
        for (std::int64_t l = 0; l < n - i; ++l) {
            lanes_a[l] = mta_add(lanes_a[l], tail_a[l]);
            lanes_b[l] = mta_add(lanes_b[l], tail_b[l]);
        }
    }
    a = combine_row_lanes(lanes_a, AddLanes{});
    b = combine_row_lanes(lanes_b, AddLanes{});
}

// The largest value(j), NaN skipped (-inf for a row of NaN); the maximum is exact in any order.
template <class Value, class A = RowValue<Value>>
MTA_ALWAYS_INLINE inline A row_lane_max(std::int64_t n, Value value) {
    const A minus_inf = mta_minus_infinity<A>();
    A lanes[MTA_ROW_LANES];
    for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = minus_inf;
    row_lane_pass(lanes, n, value, [](A m, A v) { return mta_running_max(m, v); });
    return combine_row_lanes(lanes, MaxLanes{});
}

// Rows per task of a row kernel: about 16K elements each, so a task is worth a helper.
inline std::int64_t rows_per_task(std::int64_t columns) {
    return std::max<std::int64_t>(1, (std::int64_t(1) << 14) / std::max<std::int64_t>(columns, 1));
}

}  // namespace minitorch_accum

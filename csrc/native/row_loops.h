// Row reductions of the fused native kernels, in the lane order of fused_math.cuh:
// lane l adds elements l, l + 32, ... in order (the compiler keeps the 32 partial sums
// in vector registers), then lane l + w goes into lane l for w = 16, 8, 4, 2, 1. The CUDA
// kernels and the NumPy reference sum in this order too.
#pragma once

#include <algorithm>
#include <cstdint>

#include "fused_math.cuh"
#include "native/simd.h"

namespace minitorch_accum {

MTA_ALWAYS_INLINE inline double combine_row_lanes(double* lanes) {
    for (int w = MTA_ROW_LANES / 2; w > 0; w >>= 1) {
        for (int l = 0; l < w; ++l) lanes[l] = mta_add(lanes[l], lanes[l + w]);
    }
    return lanes[0];
}

// The sum of value(j) over j in [0, n), value returning a double.
template <class Value>
MTA_ALWAYS_INLINE inline double row_lane_sum(std::int64_t n, Value value) {
    double lanes[MTA_ROW_LANES];
    for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = 0.0;
    std::int64_t i = 0;
    for (; i + MTA_ROW_LANES <= n; i += MTA_ROW_LANES) {
#pragma omp simd
        for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = mta_add(lanes[l], value(i + l));
    }
    for (int l = 0; i + l < n; ++l) lanes[l] = mta_add(lanes[l], value(i + l));
    return combine_row_lanes(lanes);
}

// The largest value(j), NaN skipped (-inf for a row of NaN); the maximum is exact in any order.
template <class Value>
MTA_ALWAYS_INLINE inline double row_lane_max(std::int64_t n, Value value) {
    double lanes[MTA_ROW_LANES];
    for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = mta_double_from_bits(0xfff0000000000000ull);
    std::int64_t i = 0;
    for (; i + MTA_ROW_LANES <= n; i += MTA_ROW_LANES) {
#pragma omp simd
        for (int l = 0; l < MTA_ROW_LANES; ++l) lanes[l] = mta_running_max(lanes[l], value(i + l));
    }
    for (int l = 0; i + l < n; ++l) lanes[l] = mta_running_max(lanes[l], value(i + l));
    double m = lanes[0];
    for (int l = 1; l < MTA_ROW_LANES; ++l) m = mta_running_max(m, lanes[l]);
    return m;
}

// Rows per task of a row kernel: about 16K elements each, so a task is worth a helper.
inline std::int64_t rows_per_task(std::int64_t columns) {
    return std::max<std::int64_t>(1, (std::int64_t(1) << 14) / std::max<std::int64_t>(columns, 1));
}

}  // namespace minitorch_accum

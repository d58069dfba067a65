#include "native/simd.h"

#include <cstdlib>
#include <cstring>

namespace minitorch_accum {

namespace {

SimdLevel detect() {
#if MTA_HAVE_SIMD_TARGETS
    __builtin_cpu_init();
    SimdLevel level = SimdLevel::baseline;
    if (__builtin_cpu_supports("avx2")) level = SimdLevel::avx2;
    if (level == SimdLevel::avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
        level = SimdLevel::avx512;
    }
    const char* cap = std::getenv("MTA_SIMD");
    if (cap != nullptr) {
        if (std::strcmp(cap, "baseline") == 0) level = SimdLevel::baseline;
        if (std::strcmp(cap, "avx2") == 0 && level == SimdLevel::avx512) level = SimdLevel::avx2;
    }
    return level;
#else
    return SimdLevel::baseline;
#endif
}

}  // namespace

SimdLevel simd_level() {
    static const SimdLevel level = detect();
    return level;
}

}  // namespace minitorch_accum

// Which vector instruction set the native loops use: the module is built for
// the x86-64 baseline (SSE2) so that it runs anywhere, and its hot loops are
// compiled again for AVX2 and AVX-512 (function target attributes); the CPU
// is asked once which it runs.
//
// Every variant rounds exactly as the baseline does: the build has
// -ffp-contract=off (no fused multiply-add in any variant, "fma" is not among
// the targets anyway), vector IEEE operations round like scalar ones, and no
// variant sets flush-to-zero. The targets name instruction sets, not an
// "arch=", so the header's small inline functions may still be inlined into
// them (GCC refuses to inline across different arch settings).
#pragma once

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define MTA_HAVE_SIMD_TARGETS 1
#define MTA_TARGET_AVX2 __attribute__((target("avx2")))
#define MTA_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512vl,avx512bw,avx512dq")))
#define MTA_ALWAYS_INLINE __attribute__((always_inline))
#else
#define MTA_HAVE_SIMD_TARGETS 0
#define MTA_TARGET_AVX2
#define MTA_TARGET_AVX512
#define MTA_ALWAYS_INLINE
#endif

namespace minitorch_accum {

enum class SimdLevel { baseline, avx2, avx512 };

// Asked once per process (CPUID and, inside __builtin_cpu_supports, whether
// the OS saves the wide registers). MTA_SIMD=baseline|avx2 caps it, to
// compare the variants or to rule one out.
SimdLevel simd_level();

}  // namespace minitorch_accum

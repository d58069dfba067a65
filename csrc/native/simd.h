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

#define MTA_UNPAREN(...) __VA_ARGS__

// The AVX-512 and AVX2 clones of the function template ``body``: ``body##_avx512`` and
// ``body##_avx2`` take ``params`` and return ``body<targs> args``, the same body compiled for
// those targets (it must inline into them: MTA_ALWAYS_INLINE or small). ``tparams``, ``targs``,
// ``params`` and ``args`` are parenthesized lists.
#define MTA_SIMD_CLONES(body, tparams, targs, params, args)                                         \
    template <MTA_UNPAREN tparams>                                                                  \
    MTA_TARGET_AVX512 auto body##_avx512 params { return body<MTA_UNPAREN targs> args; }            \
    template <MTA_UNPAREN tparams>                                                                  \
    MTA_TARGET_AVX2 auto body##_avx2 params { return body<MTA_UNPAREN targs> args; }

namespace minitorch_accum {

enum class SimdLevel { baseline, avx2, avx512 };

// Asked once per process (CPUID and, inside __builtin_cpu_supports, whether
// the OS saves the wide registers). MTA_SIMD=baseline|avx2 caps it, to
// compare the variants or to rule one out.
SimdLevel simd_level();

}  // namespace minitorch_accum

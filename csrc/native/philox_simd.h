// The rounding stream's Philox4x32-10 blocks (accum_math.cuh: mta_rounding_block) for the
// native stochastic kernels, 16 (AVX-512) or 8 (AVX2) blocks per step.
//
// Why not the header's function in a loop the compiler vectorizes, as every other native
// kernel does: GCC vectorizes its 32 x 32 -> 64-bit products as 64-bit multiplies and
// shuffles (vpmullq, or three vpmuludq without AVX-512DQ), so the stream cost ~1 element per
// ns and made add_scale_stochastic compute-bound. Here each 64-bit lane holds one block, so
// one vpmuludq per product gives both words (the round as written in the header), and the
// four words of each block are gathered so that they leave in the order the scalar function
// gives them. Integer arithmetic only: the bits are the header's
// exactly, which the kernel tests check against the NumPy reference (whose Philox passes
// Random123's known answers) on every path.
#pragma once

// GCC 12's intrinsics headers set unused vector halves from an "undefined" value that its
// -Wmaybe-uninitialized then reports at every use (GCC bug 105593, fixed in 12.3): silenced
// for this header's functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "accum_math.cuh"
#include "native/simd.h"

namespace minitorch_accum {

// Blocks [block, block + count) with the header's function, 4 words each.
inline void rounding_words_scalar(mta_u32* words, const MtaRoundingStream& s, mta_u64 block, std::int64_t count) {
    for (std::int64_t b = 0; b < count; ++b) mta_rounding_block(s, block + static_cast<mta_u64>(b), words + 4 * b);
}

#if MTA_HAVE_SIMD_TARGETS

// The vectors hold one block per 64-bit lane, each word in the lane's low half: vpmuludq then
// multiplies the low halves into the whole 64-bit product, whose high word is one shift away
// and whose low word is the lane itself, so a round is 2 products, 2 shifts and 2 xors (of
// three) per lane; the high halves carry garbage that no low half ever takes in.
#define MTA_PHILOX_ROUNDS(V, mul, shift, xor3, set1)                   \
    do {                                                               \
        mta_u32 k0 = static_cast<mta_u32>(s.seed);                     \
        mta_u32 k1 = static_cast<mta_u32>(s.seed >> 32);               \
        for (int round = 0; round < 10; ++round) {                     \
            const auto key0 = set1(static_cast<long long>(k0));        \
            const auto key1 = set1(static_cast<long long>(k1));        \
            for (int v = 0; v < V; ++v) {                              \
                const auto p0 = mul(c0[v], m0);                        \
                const auto p1 = mul(c2[v], m1);                        \
                c0[v] = xor3(shift(p1, 32), c1[v], key0);              \
                c2[v] = xor3(shift(p0, 32), c3[v], key1);              \
                c1[v] = p1;                                            \
                c3[v] = p0;                                            \
            }                                                          \
            k0 += 0x9E3779B9u;                                         \
            k1 += 0xBB67AE85u;                                         \
        }                                                              \
    } while (0)

MTA_TARGET_AVX512 inline __m512i philox_xor3_avx512(__m512i a, __m512i b, __m512i c) {
    return _mm512_ternarylogic_epi64(a, b, c, 0x96);  // 0x96: a ^ b ^ c
}

// 8 V blocks from `block` (lane j of vector v: block + 8 v + j) into words, 4 per block in
// block order. V = 4 keeps four independent chains of rounds in flight: each round waits on its
// products, and the other chains fill the wait (with V = 1, 2, 4: 3.7, 5.1, 6.1 elements per ns).
template <int V>
MTA_TARGET_AVX512 inline void philox_blocks_avx512(mta_u32* words, const MtaRoundingStream& s, mta_u64 block) {
    const __m512i m0 = _mm512_set1_epi64(0xD2511F53u);
    const __m512i m1 = _mm512_set1_epi64(0xCD9E8D57u);
    const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    __m512i c0[V], c1[V], c2[V], c3[V];
    for (int v = 0; v < V; ++v) {
        const __m512i index = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(block + 8u * v)), lane);
        c0[v] = index;  // the block index's low word (in the low half)
        c1[v] = _mm512_srli_epi64(index, 32);
        c2[v] = _mm512_set1_epi64(s.micro_batch);
        c3[v] = _mm512_set1_epi64(s.window);
    }
    MTA_PHILOX_ROUNDS(V, _mm512_mul_epu32, _mm512_srli_epi64, philox_xor3_avx512, _mm512_set1_epi64);
    // lane j of (w01, w23): words 0, 1 and words 2, 3 of block j; then blocks 0..3 and 4..7
    const __m512i first_half = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i second_half = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    for (int v = 0; v < V; ++v) {
        const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[v], _mm512_slli_epi64(c1[v], 32));
        const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[v], _mm512_slli_epi64(c3[v], 32));
        mta_u32* out = words + 32 * v;
        _mm512_storeu_si512(out, _mm512_permutex2var_epi64(w01, first_half, w23));
        _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi64(w01, second_half, w23));
    }
}

// 32 blocks per step, then 8, then the scalar function for what is left.
MTA_TARGET_AVX512 inline void rounding_words_avx512(mta_u32* words, const MtaRoundingStream& s, mta_u64 block,
                                                    std::int64_t count) {
    std::int64_t b = 0;
    for (; b + 32 <= count; b += 32) philox_blocks_avx512<4>(words + 4 * b, s, block + static_cast<mta_u64>(b));
    for (; b + 8 <= count; b += 8) philox_blocks_avx512<1>(words + 4 * b, s, block + static_cast<mta_u64>(b));
    rounding_words_scalar(words + 4 * b, s, block + static_cast<mta_u64>(b), count - b);
}

MTA_TARGET_AVX2 inline __m256i philox_xor3_avx2(__m256i a, __m256i b, __m256i c) {
    return _mm256_xor_si256(_mm256_xor_si256(a, b), c);
}

// The same with 4 blocks per vector.
template <int V>
MTA_TARGET_AVX2 inline void philox_blocks_avx2(mta_u32* words, const MtaRoundingStream& s, mta_u64 block) {
    const __m256i m0 = _mm256_set1_epi64x(0xD2511F53u);
    const __m256i m1 = _mm256_set1_epi64x(0xCD9E8D57u);
    const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
    __m256i c0[V], c1[V], c2[V], c3[V];
    for (int v = 0; v < V; ++v) {
        const __m256i index = _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(block + 4u * v)), lane);
        c0[v] = index;
        c1[v] = _mm256_srli_epi64(index, 32);
        c2[v] = _mm256_set1_epi64x(s.micro_batch);
        c3[v] = _mm256_set1_epi64x(s.window);
    }
    MTA_PHILOX_ROUNDS(V, _mm256_mul_epu32, _mm256_srli_epi64, philox_xor3_avx2, _mm256_set1_epi64x);
    for (int v = 0; v < V; ++v) {
        const __m256i w01 = _mm256_blend_epi32(c0[v], _mm256_slli_epi64(c1[v], 32), 0xAA);
        const __m256i w23 = _mm256_blend_epi32(c2[v], _mm256_slli_epi64(c3[v], 32), 0xAA);
        const __m256i even = _mm256_unpacklo_epi64(w01, w23);  // 128-bit lane L: block 2L
        const __m256i odd = _mm256_unpackhi_epi64(w01, w23);   // block 2L + 1
        mta_u32* out = words + 16 * v;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(even, odd, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_permute2x128_si256(even, odd, 0x31));
    }
}

// 16 blocks per step, then 4, then the scalar function.
MTA_TARGET_AVX2 inline void rounding_words_avx2(mta_u32* words, const MtaRoundingStream& s, mta_u64 block,
                                                std::int64_t count) {
    std::int64_t b = 0;
    for (; b + 16 <= count; b += 16) philox_blocks_avx2<4>(words + 4 * b, s, block + static_cast<mta_u64>(b));
    for (; b + 4 <= count; b += 4) philox_blocks_avx2<1>(words + 4 * b, s, block + static_cast<mta_u64>(b));
    rounding_words_scalar(words + 4 * b, s, block + static_cast<mta_u64>(b), count - b);
}

#undef MTA_PHILOX_ROUNDS

#endif

}  // namespace minitorch_accum

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

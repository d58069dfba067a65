// The float32 GEMM of our own: C = alpha op(A) op(B) + beta C, row-major. Per multiply-add it
// reads an element of A and of B (4 B each), mostly from L1 and L2; C is written once (4 B/elem,
// read too when beta is not 0), op(B) copied once when it is packed (4 B/elem read and written).
//
// Why not OpenBLAS's sgemm: its bits depend on how a product is cut and on the kernel it picked
// for the CPU (gemm_cpu.cpp has the measurements). Here every element of C is summed in one
// order: k is cut into blocks of 256; each block is one chain of fused multiply-adds over its k in
// ascending order, starting from +0; the blocks' sums are added in order (((s0 + s1) + s2) ...;
// the error bound grows with 256 + K/256 terms, not K); then
//     t = alpha * sum   (skipped when alpha is 1)
//     C = t             when beta is 0 (C is not read: BLAS's rule)
//     C = C + t         when beta is 1
//     C = beta * C + t  otherwise (a product, then a sum: two roundings)
//     C = C + bias[j]   last, when a bias row is given (a Linear's forward: the sum the Add op
//                       would make over the product, in the same rounding, without its pass
//                       over C: 8 B/elem less)
// The vector variants run each chain along k in one SIMD lane, and threads split C by rows and
// columns, never k. So the bits are the same at any thread count, under AVX-512, AVX2 and the
// scalar fallback, and under either OpenBLAS kernel (SkylakeX or Haswell): on every x86-64
// machine. It is also faster than NumPy's OpenBLAS on the models' shapes (docs/kernels.md).
//
// Layout (BLIS's loops; A packed only where it is transposed and far apart, see sgemm_task):
// op(B) is read in panels of 32 columns, k rows each:
// where it lies when it is row-major and every panel is whole, else copied once into zero-padded
// panels (by gathers when it is transposed). K is cut into blocks of 256 (a panel's block of
// 32 KiB stays in L1 while every row tile passes over it) and rows into blocks of 168 (A's block
// stays in L2). A tile is 14 rows x 32 columns under AVX-512 (28 accumulators; 14 x 16 for a
// panel of 16 columns or less), 6 x 16 under AVX2, 4 rows under the scalar loop.
#include "native/sgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "native/parallel.h"
#include "native/simd.h"

#if MTA_HAVE_SIMD_TARGETS
#define MTA_TARGET_SGEMM_AVX2 __attribute__((target("avx2,fma")))
#define MTA_TARGET_SGEMM_AVX512 __attribute__((target("avx2,fma,avx512f,avx512vl,avx512bw,avx512dq")))
#endif

namespace minitorch_accum {

namespace {

constexpr std::int64_t kSgemmPanel = 32;      // columns of a packed panel of op(B)
constexpr std::int64_t kSgemmDepth = 256;     // rows of k in one block
constexpr std::int64_t kSgemmRowBlock = 168;  // a multiple of every tile's rows (14, 6, 4)

// One tile's work: rows [0, rows) of C against one packed panel, over one block of k.
struct SgemmTile {
    std::int64_t depth;  // k in this block
    std::int64_t lda;
    const float* a;      // op(A) at (the tile's first row, the block's first k)
    const float* panel;  // op(B)'s panel at the block's first k
    std::int64_t ldpanel;  // floats between two k of `panel`: kSgemmPanel packed, ldb read in place
    float* partial;      // the tile's running sums between blocks of k
    std::int64_t ldp;    // floats between two rows of `partial`
    float* c;
    std::int64_t ldc;
    const float* bias;   // the bias row at this panel's first column, or nullptr
    int width;           // columns of C in this panel (1 to 32)
    bool resume;         // add the block's sums to `partial` (the blocks before it)
    bool finish;         // write C; else store the sums in `partial`
    float alpha, beta;
};

// The last step of an element, the same in every variant.
inline float sgemm_finish_scalar(float sum, float c, float alpha, float beta) {
    const float t = alpha == 1.0f ? sum : alpha * sum;
    if (beta == 0.0f) return t;
    if (beta == 1.0f) return c + t;
    return beta * c + t;
}

template <bool TransA>
inline float sgemm_a(const float* a, std::int64_t lda, std::int64_t row, std::int64_t p) {
    return TransA ? a[p * lda + row] : a[row * lda + p];
}

// Scalar fallback (a CPU without AVX2 and FMA, or MTA_SIMD=baseline): the same chains, one by one.
template <int Rows, bool TransA>
void sgemm_tile_scalar(const SgemmTile& t) {
#pragma GCC unroll 14
    for (int r = 0; r < Rows; ++r) {
        for (int j = 0; j < t.width; ++j) {  // a padded column's sum is never needed
            float sum = 0.0f;
            for (std::int64_t p = 0; p < t.depth; ++p) {
                sum = std::fma(sgemm_a<TransA>(t.a, t.lda, r, p), t.panel[p * t.ldpanel + j], sum);
            }
            if (t.resume) sum = t.partial[r * t.ldp + j] + sum;
            if (t.finish) {
                float* c = t.c + r * t.ldc + j;
                float x = sgemm_finish_scalar(sum, t.beta == 0.0f ? 0.0f : *c, t.alpha, t.beta);
                if (t.bias != nullptr) x = x + t.bias[j];
                *c = x;
            } else {
                t.partial[r * t.ldp + j] = sum;
            }
        }
    }
}

#if MTA_HAVE_SIMD_TARGETS

// Rows x 16 Halves under AVX-512: Halves registers a row, B's vectors loaded once per k, A's
// element broadcast into them.
template <int Rows, bool TransA, int Halves>
MTA_TARGET_SGEMM_AVX512 MTA_ALWAYS_INLINE inline void sgemm_tile512(const SgemmTile& t) {
    __m512 acc[Rows][Halves];
#pragma GCC unroll 14
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
        for (int h = 0; h < Halves; ++h) acc[r][h] = _mm512_setzero_ps();
    }
    for (std::int64_t p = 0; p < t.depth; ++p) {
        __m512 b[Halves];
#pragma GCC unroll 2
        for (int h = 0; h < Halves; ++h) b[h] = _mm512_loadu_ps(t.panel + p * t.ldpanel + 16 * h);
#pragma GCC unroll 14
        for (int r = 0; r < Rows; ++r) {
            const __m512 a = _mm512_set1_ps(sgemm_a<TransA>(t.a, t.lda, r, p));
#pragma GCC unroll 2
            for (int h = 0; h < Halves; ++h) acc[r][h] = _mm512_fmadd_ps(a, b[h], acc[r][h]);
        }
    }
    if (t.resume) {
#pragma GCC unroll 14
        for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
            for (int h = 0; h < Halves; ++h) acc[r][h] = _mm512_add_ps(_mm512_loadu_ps(t.partial + r * t.ldp + 16 * h), acc[r][h]);
        }
    }
    if (!t.finish) {
#pragma GCC unroll 14
        for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
            for (int h = 0; h < Halves; ++h) _mm512_storeu_ps(t.partial + r * t.ldp + 16 * h, acc[r][h]);
        }
        return;
    }
    const __mmask16 mask[2] = {
        static_cast<__mmask16>(t.width >= 16 ? 0xffffu : (1u << t.width) - 1u),
        static_cast<__mmask16>(t.width >= 32 ? 0xffffu : t.width > 16 ? (1u << (t.width - 16)) - 1u : 0u)};
    const __m512 alpha = _mm512_set1_ps(t.alpha), beta = _mm512_set1_ps(t.beta);
#pragma GCC unroll 14
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
        for (int h = 0; h < Halves; ++h) {
            float* c = t.c + r * t.ldc + 16 * h;
            __m512 x = t.alpha == 1.0f ? acc[r][h] : _mm512_mul_ps(alpha, acc[r][h]);
            if (t.beta != 0.0f) {
                const __m512 old = _mm512_maskz_loadu_ps(mask[h], c);
                x = _mm512_add_ps(t.beta == 1.0f ? old : _mm512_mul_ps(beta, old), x);
            }
            if (t.bias != nullptr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[h], t.bias + 16 * h));
            _mm512_mask_storeu_ps(c, mask[h], x);
        }
    }
}

// A panel of C 16 columns wide or less (attention's products of 16-wide heads) takes one register a row.
template <int Rows, bool TransA>
MTA_TARGET_SGEMM_AVX512 void sgemm_tile_avx512(const SgemmTile& t) {
    if (t.width > 16) {
        sgemm_tile512<Rows, TransA, 2>(t);
    } else {
        sgemm_tile512<Rows, TransA, 1>(t);
    }
}

// Rows x 16 under AVX2 (16 registers: 12 sums, two of B, one of A), one half of a panel.
template <int Rows, bool TransA>
MTA_TARGET_SGEMM_AVX2 void sgemm_half_avx2(const SgemmTile& t, int half) {
    __m256 acc[Rows][2];
    float* partial = t.partial + 16 * half;
#pragma GCC unroll 14
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
        for (int h = 0; h < 2; ++h) acc[r][h] = _mm256_setzero_ps();
    }
    const float* panel = t.panel + 16 * half;
    for (std::int64_t p = 0; p < t.depth; ++p) {
        const __m256 b0 = _mm256_loadu_ps(panel + p * t.ldpanel);
        const __m256 b1 = _mm256_loadu_ps(panel + p * t.ldpanel + 8);
#pragma GCC unroll 6
        for (int r = 0; r < Rows; ++r) {
            const __m256 a = _mm256_broadcast_ss(&t.a[TransA ? p * t.lda + r : r * t.lda + p]);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    if (t.resume) {
#pragma GCC unroll 14
        for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
            for (int h = 0; h < 2; ++h) acc[r][h] = _mm256_add_ps(_mm256_loadu_ps(partial + r * t.ldp + 8 * h), acc[r][h]);
        }
    }
    if (!t.finish) {
#pragma GCC unroll 14
        for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(partial + r * t.ldp + 8 * h, acc[r][h]);
        }
        return;
    }
    __m256i mask[2];
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 14
    for (int h = 0; h < 2; ++h) mask[h] = _mm256_cmpgt_epi32(_mm256_set1_epi32(t.width - 16 * half - 8 * h), lanes);
    const __m256 alpha = _mm256_set1_ps(t.alpha), beta = _mm256_set1_ps(t.beta);
#pragma GCC unroll 14
    for (int r = 0; r < Rows; ++r) {
#pragma GCC unroll 14
        for (int h = 0; h < 2; ++h) {
            float* c = t.c + r * t.ldc + 16 * half + 8 * h;
            __m256 x = t.alpha == 1.0f ? acc[r][h] : _mm256_mul_ps(alpha, acc[r][h]);
            if (t.beta != 0.0f) {
                const __m256 old = _mm256_maskload_ps(c, mask[h]);
                x = _mm256_add_ps(t.beta == 1.0f ? old : _mm256_mul_ps(beta, old), x);
            }
            if (t.bias != nullptr) x = _mm256_add_ps(x, _mm256_maskload_ps(t.bias + 16 * half + 8 * h, mask[h]));
            _mm256_maskstore_ps(c, mask[h], x);
        }
    }
}

template <int Rows, bool TransA>
MTA_TARGET_SGEMM_AVX2 void sgemm_tile_avx2(const SgemmTile& t) {
    sgemm_half_avx2<Rows, TransA>(t, 0);
    if (t.width > 16) sgemm_half_avx2<Rows, TransA>(t, 1);  // else it would hold padding only
}

#endif

using SgemmTileFunction = void (*)(const SgemmTile&);

struct SgemmVariant {
    SimdLevel level;                        // the instruction set its tiles (and the packing) use
    int rows;                               // a tile's rows; fewer at the end of a row block
    SgemmTileFunction tiles[2][15];         // [TransA][rows], rows 1 .. `rows`
};

template <template <int, bool> class Kernel, int... R>
SgemmVariant sgemm_variant_of(std::integer_sequence<int, R...>) {
    SgemmVariant v{SimdLevel::baseline, static_cast<int>(sizeof...(R)), {}};
    ((v.tiles[0][R + 1] = &Kernel<R + 1, false>::run), ...);
    ((v.tiles[1][R + 1] = &Kernel<R + 1, true>::run), ...);
    return v;
}

template <template <int, bool> class Kernel, int Rows>
SgemmVariant sgemm_variant(SimdLevel level) {
    SgemmVariant v = sgemm_variant_of<Kernel>(std::make_integer_sequence<int, Rows>{});
    v.level = level;
    return v;
}

template <int Rows, bool TransA>
struct SgemmScalarKernel {
    static void run(const SgemmTile& t) { sgemm_tile_scalar<Rows, TransA>(t); }
};
#if MTA_HAVE_SIMD_TARGETS
template <int Rows, bool TransA>
struct SgemmAvx2Kernel {
    static void run(const SgemmTile& t) { sgemm_tile_avx2<Rows, TransA>(t); }
};
template <int Rows, bool TransA>
struct SgemmAvx512Kernel {
    static void run(const SgemmTile& t) { sgemm_tile_avx512<Rows, TransA>(t); }
};
#endif

// The variant for this CPU: AVX2 also needs FMA (every AVX2 x86-64 CPU we know has it; the
// check keeps a CPU without it on the scalar chain, which gives the same bits).
const SgemmVariant& sgemm_kernels() {
    static const SgemmVariant variant = [] {
#if MTA_HAVE_SIMD_TARGETS
        const SimdLevel level = simd_level();
        if (level != SimdLevel::baseline && __builtin_cpu_supports("fma")) {
            if (level == SimdLevel::avx512) return sgemm_variant<SgemmAvx512Kernel, 14>(level);
            return sgemm_variant<SgemmAvx2Kernel, 6>(level);
        }
#endif
        return sgemm_variant<SgemmScalarKernel, 4>(SimdLevel::baseline);
    }();
    return variant;
}

// 64-byte aligned float storage that grows and is reused (a product allocates nothing once warm).
struct SgemmBuffer {
    std::vector<float> storage;
    float* get(std::int64_t floats) {
        const std::size_t want = static_cast<std::size_t>(floats) + 16;
        if (storage.size() < want) storage.resize(want);
        return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) & ~std::uintptr_t(63));
    }
};

struct SgemmPlan {
    SgemmJob job;
    std::int64_t panels, row_blocks, panels_per_task, column_groups;
    float* packed;  // panels x k x kSgemmPanel
    bool in_place;  // op(B) read where it lies, not packed
};

#if MTA_HAVE_SIMD_TARGETS
// A transposed op(B)'s panel by gathers: row p of the panel is element p of `width` rows of b
// (one by one, a 16 x 32 panel of attention's k^T took 0.3 us; the gathers, a third of it).
MTA_TARGET_SGEMM_AVX512 void sgemm_gather_panel_avx512(const float* b, std::int64_t ldb, std::int64_t k, int width,
                                                       float* out) {
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(static_cast<int>(ldb)));
    const __m512i index[2] = {rows, _mm512_add_epi32(rows, _mm512_set1_epi32(static_cast<int>(16 * ldb)))};
    const __mmask16 mask[2] = {
        static_cast<__mmask16>(width >= 16 ? 0xffffu : (1u << width) - 1u),
        static_cast<__mmask16>(width >= 32 ? 0xffffu : width > 16 ? (1u << (width - 16)) - 1u : 0u)};
    for (std::int64_t p = 0; p < k; ++p) {
        for (int h = 0; h < 2; ++h) {
            _mm512_store_ps(out + p * kSgemmPanel + 16 * h,
                            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask[h], index[h], b + p, 4));
        }
    }
}

MTA_TARGET_SGEMM_AVX2 void sgemm_gather_panel_avx2(const float* b, std::int64_t ldb, std::int64_t k, int width,
                                                   float* out) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i index[4];
    __m256 mask[4];
    for (int q = 0; q < 4; ++q) {
        index[q] = _mm256_mullo_epi32(_mm256_add_epi32(lanes, _mm256_set1_epi32(8 * q)),
                                      _mm256_set1_epi32(static_cast<int>(ldb)));
        mask[q] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(width - 8 * q), lanes));
    }
    for (std::int64_t p = 0; p < k; ++p) {
        for (int q = 0; q < 4; ++q) {
            _mm256_store_ps(out + p * kSgemmPanel + 8 * q,
                            _mm256_mask_i32gather_ps(_mm256_setzero_ps(), b + p, index[q], mask[q], 4));
        }
    }
}
#endif

// Panel `panel` of op(B): row p holds op(B)(p, 32 panel ...), zeros past column n.
void sgemm_pack_panel(const SgemmPlan& plan, std::int64_t panel) {
    const SgemmJob& j = plan.job;
    const std::int64_t first = panel * kSgemmPanel, width = std::min(kSgemmPanel, j.n - first);
    float* out = plan.packed + panel * j.k * kSgemmPanel;
#if MTA_HAVE_SIMD_TARGETS
    // 32-bit gather offsets: rows of b up to 2^25 floats apart
    if (j.trans_b && j.ldb < (std::int64_t(1) << 25)) {
        const SimdLevel level = sgemm_kernels().level;
        if (level == SimdLevel::avx512) {
            return sgemm_gather_panel_avx512(j.b + first * j.ldb, j.ldb, j.k, static_cast<int>(width), out);
        }
        if (level == SimdLevel::avx2) {
            return sgemm_gather_panel_avx2(j.b + first * j.ldb, j.ldb, j.k, static_cast<int>(width), out);
        }
    }
#endif
    if (j.trans_b) {  // op(B)(p, c) = b[c][p]: each column of the panel is a row of b
        for (std::int64_t p = 0; p < j.k; ++p) std::fill_n(out + p * kSgemmPanel + width, kSgemmPanel - width, 0.0f);
        for (std::int64_t c = 0; c < width; ++c) {
            const float* row = j.b + (first + c) * j.ldb;
            for (std::int64_t p = 0; p < j.k; ++p) out[p * kSgemmPanel + c] = row[p];
        }
    } else {
        for (std::int64_t p = 0; p < j.k; ++p) {
            std::memcpy(out + p * kSgemmPanel, j.b + p * j.ldb + first, static_cast<std::size_t>(width) * sizeof(float));
            std::fill_n(out + p * kSgemmPanel + width, kSgemmPanel - width, 0.0f);
        }
    }
}

// A transposed op(A)'s block, `rows` of op(A) over `depth` of k (row p of `a` holds element p of
// every row), copied tile by tile: tile t is `depth` runs of `tile` floats at t * tile * depth, as
// a tile reads them (lda = tile). A whole tile's run is a copy of a constant size, which the
// compiler turns into a few moves: a call of memcpy each would cost as much as the GEMM gains.
template <int Tile>
void sgemm_pack_a_tiles(const float* a, std::int64_t lda, std::int64_t depth, std::int64_t rows, float* out) {
    const std::int64_t whole = rows / Tile, rest = rows % Tile;
    for (std::int64_t p = 0; p < depth; ++p) {
        const float* source = a + p * lda;
        float* target = out + p * Tile;
        for (std::int64_t t = 0; t < whole; ++t) {
            std::memcpy(target + t * Tile * depth, source + t * Tile, Tile * sizeof(float));
        }
        if (rest) std::memcpy(target + whole * Tile * depth, source + whole * Tile, rest * sizeof(float));
    }
}

void sgemm_pack_a(const float* a, std::int64_t lda, std::int64_t depth, std::int64_t rows, int tile, float* out) {
    switch (tile) {
        case 14: return sgemm_pack_a_tiles<14>(a, lda, depth, rows, out);
        case 6: return sgemm_pack_a_tiles<6>(a, lda, depth, rows, out);
        case 4: return sgemm_pack_a_tiles<4>(a, lda, depth, rows, out);
        default: break;
    }
    for (std::int64_t p = 0; p < depth; ++p) {  // no variant has other tiles: kept for safety
        for (std::int64_t r = 0; r < rows; ++r) out[(r / tile) * tile * depth + p * tile + r % tile] = a[p * lda + r];
    }
}

// Task t: one block of rows against one group of panels, over all of k.
void sgemm_task(const SgemmPlan& plan, std::int64_t task) {
    thread_local SgemmBuffer partial_buffer;
    thread_local SgemmBuffer a_buffer;
    const SgemmJob& j = plan.job;
    const SgemmVariant& kernels = sgemm_kernels();
    const std::int64_t row_block = task / plan.column_groups, group = task % plan.column_groups;
    const std::int64_t row_begin = row_block * kSgemmRowBlock, row_end = std::min(j.m, row_begin + kSgemmRowBlock);
    const std::int64_t panel_begin = group * plan.panels_per_task;
    const std::int64_t panel_end = std::min(plan.panels, panel_begin + plan.panels_per_task);
    const std::int64_t partial_ld = (panel_end - panel_begin) * kSgemmPanel;
    float* partial = j.k > kSgemmDepth ? partial_buffer.get((row_end - row_begin) * partial_ld) : nullptr;
    const SgemmTileFunction* tiles = kernels.tiles[j.trans_a ? 1 : 0];
    // A transposed op(A) (a weight gradient's x^T) is read 14 floats from each of `depth` rows lda
    // apart. Where those rows are far apart (lda of 128 floats or more) and A comes from memory
    // (an activation the forward saved), the reads wait on a line each; copied first, tile by
    // tile, into runs of kernels.rows floats, the block is read row by row and the tiles stream
    // (the same elements in the same order: no bit changes). The copy costs 5-20% of a warm
    // product, so only where 4 panels or more reuse it. Measured in nanoGPT's micro-batch, one
    // thread: its x^T g of 768 x 512 x 128 took 4.35 ms a micro-batch, 2.79 packed; the whole
    // micro-batch 2.9 to 4.0 ms less in three pairs of runs. The char transformer's (lda 64 and
    // 256, most with under 4 panels) gained nothing and are not packed.
    const bool pack_a = j.trans_a && j.lda >= 128 && plan.panels_per_task >= 4;
    const std::int64_t row_tiles = (row_end - row_begin + kernels.rows - 1) / kernels.rows;
    float* packed_a = pack_a ? a_buffer.get(row_tiles * kernels.rows * std::min(kSgemmDepth, j.k)) : nullptr;
    for (std::int64_t p0 = 0; p0 < j.k; p0 += kSgemmDepth) {
        const std::int64_t depth = std::min(kSgemmDepth, j.k - p0);
        if (pack_a) sgemm_pack_a(j.a + p0 * j.lda + row_begin, j.lda, depth, row_end - row_begin, kernels.rows, packed_a);
        for (std::int64_t panel = panel_begin; panel < panel_end; ++panel) {
            const std::int64_t column = panel * kSgemmPanel;
            for (std::int64_t row = row_begin; row < row_end; row += kernels.rows) {
                const int rows = static_cast<int>(std::min<std::int64_t>(kernels.rows, row_end - row));
                SgemmTile tile;
                tile.depth = depth;
                if (pack_a) {
                    tile.lda = kernels.rows;
                    tile.a = packed_a + ((row - row_begin) / kernels.rows) * depth * kernels.rows;
                } else {
                    tile.lda = j.lda;
                    tile.a = j.trans_a ? j.a + p0 * j.lda + row : j.a + row * j.lda + p0;
                }
                if (plan.in_place) {
                    tile.panel = j.b + p0 * j.ldb + column;
                    tile.ldpanel = j.ldb;
                } else {
                    tile.panel = plan.packed + panel * j.k * kSgemmPanel + p0 * kSgemmPanel;
                    tile.ldpanel = kSgemmPanel;
                }
                tile.partial = partial == nullptr
                                   ? nullptr
                                   : partial + (row - row_begin) * partial_ld + (panel - panel_begin) * kSgemmPanel;
                tile.c = j.c + row * j.ldc + column;
                tile.ldp = partial_ld;
                tile.ldc = j.ldc;
                tile.bias = j.bias == nullptr ? nullptr : j.bias + column;
                tile.width = static_cast<int>(std::min(kSgemmPanel, j.n - column));
                tile.resume = p0 > 0;
                tile.finish = p0 + depth >= j.k;
                tile.alpha = j.alpha;
                tile.beta = j.beta;
                tiles[rows](tile);
            }
        }
    }
}

}  // namespace

void run_sgemm(const SgemmJob& job, bool parallel) {
    if (job.m == 0 || job.n == 0) return;
    if (job.k == 0) {  // every sum is +0
        for (std::int64_t i = 0; i < job.m; ++i) {
            for (std::int64_t c = 0; c < job.n; ++c) {
                float& out = job.c[i * job.ldc + c];
                out = sgemm_finish_scalar(0.0f, job.beta == 0.0f ? 0.0f : out, job.alpha, job.beta);
                if (job.bias != nullptr) out = out + job.bias[c];
            }
        }
        return;
    }
    thread_local SgemmBuffer packed_buffer;
    SgemmPlan plan{};
    plan.job = job;
    plan.panels = (job.n + kSgemmPanel - 1) / kSgemmPanel;
    plan.row_blocks = (job.m + kSgemmRowBlock - 1) / kSgemmRowBlock;
    // a row-major op(B) whose panels are all whole (32 columns, or a last one of 16 that a tile reads
    // 16 wide) is read where it lies: the copy cost more than it saved (a weight gradient's
    // 64 x 1024 x 192: 194 us with it, 148 without; attention's p @ v stack: 54 and 48)
    plan.in_place = !job.trans_b && job.n % 16 == 0;
    plan.packed = plan.in_place ? nullptr : packed_buffer.get(plan.panels * job.k * kSgemmPanel);
    parallel = parallel && thread_limit() > 1 && !in_forked_child();
    // several tasks a thread (the faster thread takes more); columns are cut only when there are
    // too few blocks of rows for that. No cut changes a bit.
    std::int64_t groups = 1;
    if (parallel) {
        const std::int64_t wanted = 3 * std::int64_t(thread_limit());
        groups = std::clamp<std::int64_t>((wanted + plan.row_blocks - 1) / plan.row_blocks, 1, plan.panels);
    }
    plan.panels_per_task = (plan.panels + groups - 1) / groups;
    plan.column_groups = (plan.panels + plan.panels_per_task - 1) / plan.panels_per_task;
    if (!plan.in_place) run_tasks(plan.panels, [](void* context, std::int64_t panel) {
        sgemm_pack_panel(*static_cast<const SgemmPlan*>(context), panel);
        return false;
    }, &plan, parallel && plan.panels > 1);
    run_tasks(plan.row_blocks * plan.column_groups, [](void* context, std::int64_t task) {
        sgemm_task(*static_cast<const SgemmPlan*>(context), task);
        return false;
    }, &plan, parallel);
}

}  // namespace minitorch_accum

// Native CPU accumulation kernels over NumPy buffers: the element math of
// accum_math.cuh in loops the compiler vectorizes, spread over the native
// thread pool (parallel.h), with the GIL released.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "accum_math.cuh"
#include "multi_tensor.cuh"
#include "native/array_args.h"
#include "native/bindings.h"
#include "native/parallel.h"
#include "native/philox_simd.h"
#include "native/simd.h"

namespace minitorch_accum {

namespace {

// Below this size releasing the GIL costs more than the pass itself.
constexpr std::int64_t kReleaseGilMinElements = 4096;

// The element loop of every accumulation kernel, for one span.
template <class A, class G, int MODE, bool CHECK>
MTA_ALWAYS_INLINE inline bool accumulate_loop(A* __restrict acc, A* __restrict comp, const G* __restrict g,
                                              std::int64_t n, A s) {
    const auto* __restrict stored = reinterpret_cast<const typename StoredAs<G>::type*>(g);
    int nonfinite = 0;
#pragma omp simd reduction(| : nonfinite)
    for (std::int64_t i = 0; i < n; ++i) {
        const G x = StoredAs<G>::value(stored[i]);
        if constexpr (CHECK) nonfinite |= mta_is_finite(x) ? 0 : 1;
        const A y = mta_scaled(s, x);
        if constexpr (MtaMode<MODE>::compensated) {
            mta_accumulate_element<MODE>(acc[i], comp[i], y);
        } else {
            A unused = A(0);
            mta_accumulate_element<MODE>(acc[i], unused, y);
        }
    }
    return nonfinite != 0;
}

// The same loop compiled for AVX-512 and for AVX2 beside the SSE2 baseline;
// accumulate_span runs the widest the CPU has (simd.h). Plain add_scale from
// DRAM is memory-bound at any width, but the Neumaier loop (about ten
// operations per element, selects done on bits) was compute-bound in SSE2:
// 2^26 elements, 2 threads, 16.3 -> 34.3 GB/s with AVX-512 (2^22: 16.1 ->
// 33.0); cast_add_scale in cache, 2^14: 58 -> 70 GB/s.
template <class A, class G, int MODE, bool CHECK>
MTA_TARGET_AVX512 bool accumulate_span_avx512(A* acc, A* comp, const G* g, std::int64_t n, A s) {
    return accumulate_loop<A, G, MODE, CHECK>(acc, comp, g, n, s);
}

template <class A, class G, int MODE, bool CHECK>
MTA_TARGET_AVX2 bool accumulate_span_avx2(A* acc, A* comp, const G* g, std::int64_t n, A s) {
    return accumulate_loop<A, G, MODE, CHECK>(acc, comp, g, n, s);
}

template <class A, class G, int MODE, bool CHECK>
bool accumulate_span(A* acc, A* comp, const G* g, std::int64_t n, A s) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return accumulate_span_avx512<A, G, MODE, CHECK>(acc, comp, g, n, s);
        case SimdLevel::avx2: return accumulate_span_avx2<A, G, MODE, CHECK>(acc, comp, g, n, s);
        default: break;
    }
#endif
    return accumulate_loop<A, G, MODE, CHECK>(acc, comp, g, n, s);
}

// ---------------------------------------------------------- bfloat16 accumulators

// The element loop of a bfloat16 accumulator, for one span: summed in float32, rounded back to
// nearest, or stochastically with `random[i]` the 16 bits of element i.
template <class G, int MODE, bool CHECK>
MTA_ALWAYS_INLINE inline bool bfloat16_loop(mta_u16* __restrict acc, const G* __restrict g, std::int64_t n, float s,
                                            const mta_u16* __restrict random) {
    const auto* __restrict stored = reinterpret_cast<const typename StoredAs<G>::type*>(g);
    // no `omp simd reduction` here: with 16-bit elements GCC vectorizes 32 lanes wide on AVX-512
    // but sizes the reduction's lane array for 16 ints (and warns of the write past it); the
    // plain loop is vectorized all the same (restrict pointers, a select-only body)
    int nonfinite = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const G x = StoredAs<G>::value(stored[i]);
        if constexpr (CHECK) nonfinite |= mta_is_finite(x) ? 0 : 1;
        const mta_u16 old = MtaMode<MODE>::reads_acc ? acc[i] : mta_u16(0);
        const mta_u32 r = MtaMode<MODE>::stochastic ? mta_u32(random[i]) : 0u;
        acc[i] = mta_accumulate_bfloat16<MODE>(old, mta_scaled(s, x), r);
    }
    return nonfinite != 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the stochastic kernels read each stream word's halves as two 16-bit values: they need a little-endian host"
#endif

// Blocks [block, block + count) of the rounding stream, 4 words each, into `words`, with the
// widest Philox of philox_simd.h the level allows. On a little-endian host the words read as
// 16-bit values are the bits of the blocks' elements in order (lane 2w the low half of word w,
// lane 2w + 1 its high half, as mta_rounding_lane).
template <SimdLevel L>
MTA_ALWAYS_INLINE inline void rounding_words(mta_u32* words, const MtaRoundingStream& s, mta_u64 block,
                                             std::int64_t count) {
#if MTA_HAVE_SIMD_TARGETS
    if constexpr (L == SimdLevel::avx512) return rounding_words_avx512(words, s, block, count);
    if constexpr (L == SimdLevel::avx2) return rounding_words_avx2(words, s, block, count);
#endif
    rounding_words_scalar(words, s, block, count);
}

// Stream blocks per tile: 1024 elements' random bits (2 KiB) stay in L1 between the two loops.
constexpr std::int64_t kRandomTileBlocks = 128;

// A span of a stochastic kernel: tile by tile, the stream blocks that cover the tile, then the
// element loop over them. The bits of an element depend on its stream index only, so any
// split into spans and threads rounds alike.
template <class G, int MODE, bool CHECK, SimdLevel L>
MTA_ALWAYS_INLINE inline bool bfloat16_stochastic_span(mta_u16* acc, const G* g, std::int64_t n, float s,
                                                       const MtaRoundingStream& stream) {
    alignas(64) mta_u32 words[4 * kRandomTileBlocks];
    const mta_u16* bits = reinterpret_cast<const mta_u16*>(words);
    mta_u64 block = stream.first >> 3;
    std::int64_t skip = static_cast<std::int64_t>(stream.first & 7u);  // the first block's elements before acc[0]
    bool nonfinite = false;
    for (std::int64_t done = 0; done < n;) {
        const std::int64_t count = std::min<std::int64_t>(kRandomTileBlocks, (skip + (n - done) + 7) >> 3);
        rounding_words<L>(words, stream, block, count);
        const std::int64_t m = std::min<std::int64_t>(8 * count - skip, n - done);
        nonfinite |= bfloat16_loop<G, MODE, CHECK>(acc + done, g + done, m, s, bits + skip);
        done += m;
        block += static_cast<mta_u64>(count);
        skip = 0;
    }
    return nonfinite;
}

template <class G, int MODE, bool CHECK, SimdLevel L>
MTA_ALWAYS_INLINE inline bool bfloat16_span_body(mta_u16* acc, const G* g, std::int64_t n, float s,
                                                 const MtaRoundingStream& stream) {
    if constexpr (MtaMode<MODE>::stochastic) {
        return bfloat16_stochastic_span<G, MODE, CHECK, L>(acc, g, n, s, stream);
    } else {
        return bfloat16_loop<G, MODE, CHECK>(acc, g, n, s, nullptr);
    }
}

template <class G, int MODE, bool CHECK>
MTA_TARGET_AVX512 bool bfloat16_span_avx512(mta_u16* acc, const G* g, std::int64_t n, float s,
                                            const MtaRoundingStream& stream) {
    return bfloat16_span_body<G, MODE, CHECK, SimdLevel::avx512>(acc, g, n, s, stream);
}

template <class G, int MODE, bool CHECK>
MTA_TARGET_AVX2 bool bfloat16_span_avx2(mta_u16* acc, const G* g, std::int64_t n, float s,
                                        const MtaRoundingStream& stream) {
    return bfloat16_span_body<G, MODE, CHECK, SimdLevel::avx2>(acc, g, n, s, stream);
}

template <class G, int MODE, bool CHECK>
bool bfloat16_span(mta_u16* acc, const G* g, std::int64_t n, float s, const MtaRoundingStream& stream) {
#if MTA_HAVE_SIMD_TARGETS
    switch (simd_level()) {
        case SimdLevel::avx512: return bfloat16_span_avx512<G, MODE, CHECK>(acc, g, n, s, stream);
        case SimdLevel::avx2: return bfloat16_span_avx2<G, MODE, CHECK>(acc, g, n, s, stream);
        default: break;
    }
#endif
    return bfloat16_span_body<G, MODE, CHECK, SimdLevel::baseline>(acc, g, n, s, stream);
}

// ------------------------------------------------------------------ dispatch

struct AccumulateJob {
    void* acc;
    void* comp;
    const void* g;
    std::int64_t size;
    int kind;
    mta_u64 first = 0;  // the stream index of acc[0] (stochastic kernels)
};

// What every item of one call shares: the mode, the flag's use, the scale, the stream's key.
struct AccumulateCall {
    int mode;
    bool check;
    double scale;
    MtaRoundingStream stream;
};

template <class A, class G, int MODE, bool CHECK>
bool accumulate_typed(const AccumulateJob& job, std::int64_t begin, std::int64_t end, double scale) {
    A* acc = static_cast<A*>(job.acc) + begin;
    A* comp = job.comp ? static_cast<A*>(job.comp) + begin : nullptr;
    const G* g = static_cast<const G*>(job.g) + begin;
    return accumulate_span<A, G, MODE, CHECK>(acc, comp, g, end - begin, static_cast<A>(scale));
}

template <class G, int MODE, bool CHECK>
bool bfloat16_typed(const AccumulateJob& job, std::int64_t begin, std::int64_t end, const AccumulateCall& call) {
    mta_u16* acc = static_cast<mta_u16*>(job.acc) + begin;
    const G* g = static_cast<const G*>(job.g) + begin;
    MtaRoundingStream stream = call.stream;
    stream.first = job.first + static_cast<mta_u64>(begin);
    return bfloat16_span<G, MODE, CHECK>(acc, g, end - begin, static_cast<float>(call.scale), stream);
}

// Each mode instantiates only the kinds it accepts: the stochastic modes write bfloat16
// accumulators only, the compensated ones never do.
template <int MODE, bool CHECK>
bool accumulate_by_kind(const AccumulateJob& job, std::int64_t begin, std::int64_t end, const AccumulateCall& call) {
    const double scale = call.scale;
    if constexpr (!MtaMode<MODE>::stochastic) {
        switch (job.kind) {
            case MTA_KIND_F32_F32: return accumulate_typed<float, float, MODE, CHECK>(job, begin, end, scale);
            case MTA_KIND_F32_F16: return accumulate_typed<float, mta_half, MODE, CHECK>(job, begin, end, scale);
            case MTA_KIND_F32_BF16:
                return accumulate_typed<float, mta_bfloat16, MODE, CHECK>(job, begin, end, scale);
            case MTA_KIND_F64_F64: return accumulate_typed<double, double, MODE, CHECK>(job, begin, end, scale);
            case MTA_KIND_F64_F32: return accumulate_typed<double, float, MODE, CHECK>(job, begin, end, scale);
            default: break;
        }
    }
    if constexpr (!MtaMode<MODE>::compensated) {
        switch (job.kind) {
            case MTA_KIND_BF16_F32: return bfloat16_typed<float, MODE, CHECK>(job, begin, end, call);
            case MTA_KIND_BF16_F16: return bfloat16_typed<mta_half, MODE, CHECK>(job, begin, end, call);
            case MTA_KIND_BF16_BF16: return bfloat16_typed<mta_bfloat16, MODE, CHECK>(job, begin, end, call);
            default: break;
        }
    }
    return false;
}

template <bool CHECK>
bool accumulate_mode(const AccumulateJob& job, std::int64_t begin, std::int64_t end, const AccumulateCall& call) {
    switch (call.mode) {
        case MTA_MODE_ADD: return accumulate_by_kind<MTA_MODE_ADD, CHECK>(job, begin, end, call);
        case MTA_MODE_COPY: return accumulate_by_kind<MTA_MODE_COPY, CHECK>(job, begin, end, call);
        case MTA_MODE_ADD_COMPENSATED:
            return accumulate_by_kind<MTA_MODE_ADD_COMPENSATED, CHECK>(job, begin, end, call);
        case MTA_MODE_COPY_COMPENSATED:
            return accumulate_by_kind<MTA_MODE_COPY_COMPENSATED, CHECK>(job, begin, end, call);
        case MTA_MODE_ADD_STOCHASTIC:
            return accumulate_by_kind<MTA_MODE_ADD_STOCHASTIC, CHECK>(job, begin, end, call);
        default: return accumulate_by_kind<MTA_MODE_COPY_STOCHASTIC, CHECK>(job, begin, end, call);
    }
}

bool accumulate_range(const AccumulateCall& call, const AccumulateJob& job, std::int64_t begin, std::int64_t end) {
    return call.check ? accumulate_mode<true>(job, begin, end, call) : accumulate_mode<false>(job, begin, end, call);
}

bool is_compensated(int mode) { return mode == MTA_MODE_ADD_COMPENSATED || mode == MTA_MODE_COPY_COMPENSATED; }
bool is_stochastic(int mode) { return mode == MTA_MODE_ADD_STOCHASTIC || mode == MTA_MODE_COPY_STOCHASTIC; }
bool is_bfloat16_kind(int kind) {
    return kind == MTA_KIND_BF16_F32 || kind == MTA_KIND_BF16_F16 || kind == MTA_KIND_BF16_BF16;
}

// An integer argument of the stochastic kernels (seed, window, micro_batch, an offset), as
// kernels/validation.py:stream_integer checks it: TypeError unless an int (a bool is not),
// ValueError outside [0, 2^bits).
mta_u64 stream_integer(const char* kernel, const std::string& name, py::handle h, int bits) {
    if (!PyIndex_Check(h.ptr()) || PyBool_Check(h.ptr())) {
        raise_type_error(std::string(kernel) + ": " + name + " must be an int, got " +
                         std::string(py::str(py::type::of(h).attr("__qualname__"))));
    }
    const auto value = py::reinterpret_steal<py::object>(PyNumber_Index(h.ptr()));
    if (!value) throw py::error_already_set();
    const unsigned long long number = PyLong_AsUnsignedLongLong(value.ptr());
    const bool overflow = number == static_cast<unsigned long long>(-1) && PyErr_Occurred();
    if (overflow) PyErr_Clear();
    if (overflow || (bits < 64 && number >> bits != 0)) {
        raise_value_error(std::string(kernel) + ": " + name + " must be in [0, 2**" + std::to_string(bits) +
                          "), got " + std::string(py::str(value)));
    }
    return static_cast<mta_u64>(number);
}

// The key of a stochastic call's stream (seed, window, micro_batch), checked in that order.
MtaRoundingStream stream_key(const char* kernel, py::handle seed, py::handle window, py::handle micro_batch) {
    MtaRoundingStream stream{};
    stream.seed = stream_integer(kernel, "seed", seed, 64);
    stream.window = static_cast<mta_u32>(stream_integer(kernel, "window", window, 32));
    stream.micro_batch = static_cast<mta_u32>(stream_integer(kernel, "micro_batch", micro_batch, 32));
    return stream;
}

// Checks one (acc[, comp], g) triple in the order of kernels/validation.py.
AccumulateJob prepare(CallArrays& arrays, int mode, bool cast_only, py::handle acc_h, py::handle comp_h,
                      py::handle g_h, const Role& acc_role, const Role& comp_role, const Role& g_role) {
    const char* kernel = arrays.kernel();
    py::array acc = arrays.add(acc_h, acc_role, true);
    py::array g = arrays.add(g_h, g_role, false);
    const int kind = accumulate_kind(acc, acc_role, g, g_role, kernel, !is_compensated(mode));
    if (cast_only && kind != MTA_KIND_F32_F16 && kind != MTA_KIND_F32_BF16 && kind != MTA_KIND_BF16_F16 &&
        kind != MTA_KIND_BF16_BF16) {
        raise_type_error(std::string(kernel) + ": " + describe(g_role, g) +
                         " must be float16 or bfloat16 into a float32 or bfloat16 accumulator, got " +
                         describe(acc_role, acc));
    }
    if (is_stochastic(mode) && !is_bfloat16_kind(kind)) {
        raise_type_error(std::string(kernel) + ": " + describe(acc_role, acc) +
                         " must be bfloat16: stochastic rounding writes a bfloat16 accumulator");
    }
    require_contiguous(acc, kernel, acc_role, true);
    require_contiguous(g, kernel, g_role, false);
    require_same_size(acc, acc_role, g, g_role, kernel);
    AccumulateJob job{acc.mutable_data(), nullptr, g.data(), static_cast<std::int64_t>(acc.size()), kind};
    if (is_compensated(mode)) {
        py::array comp = arrays.add(comp_h, comp_role, true);
        if (comp.dtype().num() != acc.dtype().num()) {
            raise_type_error(std::string(kernel) + ": " + describe(comp_role, comp) + " must have the dtype of " +
                             describe(acc_role, acc));
        }
        require_contiguous(comp, kernel, comp_role, true);
        require_same_size(acc, acc_role, comp, comp_role, kernel);
        job.comp = comp.mutable_data();
    }
    return job;
}

void accumulate_one(const char* kernel, AccumulateCall call, bool cast_only, py::handle acc, py::handle comp,
                    py::handle g, py::handle offset, py::handle flag) {
    const mta_u64 first = is_stochastic(call.mode) ? stream_integer(kernel, "offset", offset, 64) : 0;
    CallArrays arrays(kernel);
    AccumulateJob job = prepare(arrays, call.mode, cast_only, acc, comp, g, "acc", "comp", "g");
    job.first = first;
    int* flag_cell = flag_pointer(arrays, flag);
    arrays.require_disjoint();
    call.check = flag_cell != nullptr;
    bool nonfinite;
    {
        std::optional<py::gil_scoped_release> nogil;
        if (job.size >= kReleaseGilMinElements) nogil.emplace();
        nonfinite = for_each_span(job.size, [&](std::int64_t begin, std::int64_t end) {
            return accumulate_range(call, job, begin, end);
        });
    }
    if (nonfinite) *flag_cell = 1;
}

void accumulate_many(const char* kernel, AccumulateCall call, bool cast_only, py::handle accs_h, py::handle comps_h,
                     py::handle gs_h, py::handle offsets_h, py::handle flag) {
    const bool compensated = is_compensated(call.mode);
    const bool numbered = is_stochastic(call.mode) && !offsets_h.is_none();
    std::vector<std::pair<std::string, py::handle>> named{{"accs", accs_h}};
    if (compensated) named.emplace_back("comps", comps_h);
    named.emplace_back("gs", gs_h);
    if (numbered) named.emplace_back("offsets", offsets_h);
    const std::vector<py::sequence> lists = require_lists(kernel, named);
    const py::sequence& accs = lists.front();
    const py::sequence& gs = lists[compensated ? 2 : 1];
    const std::size_t n = accs.size();
    std::vector<mta_u64> offsets;
    if (numbered) {
        for (std::size_t i = 0; i < n; ++i) {
            offsets.push_back(stream_integer(kernel, "offsets[" + std::to_string(i) + "]", lists.back()[i], 64));
        }
    }
    // Holds every item until the kernel is done: the GIL is released while it
    // runs, and the lists may be emptied meanwhile by another thread.
    CallArrays arrays(kernel);
    std::vector<AccumulateJob> jobs;
    jobs.reserve(n);
    mta_u64 next = 0;  // without offsets, the list is numbered as one array: each starts where the last ended
    for (std::size_t i = 0; i < n; ++i) {
        const py::object comp = compensated ? py::object(lists[1][i]) : py::object();
        jobs.push_back(
            prepare(arrays, call.mode, cast_only, accs[i], comp, gs[i], Role("accs", i), Role("comps", i),
                    Role("gs", i)));
        jobs.back().first = numbered ? offsets[i] : next;
        next += static_cast<mta_u64>(jobs.back().size);
    }
    int* flag_cell = flag_pointer(arrays, flag);
    arrays.require_disjoint();
    call.check = flag_cell != nullptr;

    // The same 64K-element chunks as the CUDA chunk table, so one long tensor
    // and many short ones spread over threads alike.
    std::vector<std::pair<std::int32_t, std::int64_t>> chunks;
    std::int64_t total = 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        for (std::int64_t b = 0; b < jobs[j].size; b += MTA_CHUNK_SIZE) {
            chunks.emplace_back(static_cast<std::int32_t>(j), b);
        }
        total += jobs[j].size;
    }
    bool nonfinite;
    {
        std::optional<py::gil_scoped_release> nogil;
        if (total >= kReleaseGilMinElements) nogil.emplace();
        nonfinite = for_each_task(static_cast<std::int64_t>(chunks.size()), total, [&](std::int64_t c) {
            const AccumulateJob& job = jobs[chunks[c].first];
            const std::int64_t begin = chunks[c].second;
            const std::int64_t end = std::min<std::int64_t>(job.size, begin + MTA_CHUNK_SIZE);
            return accumulate_range(call, job, begin, end);
        });
    }
    if (nonfinite) *flag_cell = 1;
}

}  // namespace

void bind_accumulate(py::module_& m) {
    const auto plain = [](int mode, double scale) { return AccumulateCall{mode, false, scale, MtaRoundingStream{}}; };
    const auto one = [&m, plain](const char* name, int mode, bool cast_only, const char* doc) {
        m.def(
            name,
            [name, mode, cast_only, plain](py::handle acc, py::handle g, double scale, py::handle flag) {
                accumulate_one(name, plain(mode, scale), cast_only, acc, py::handle(), g, py::handle(), flag);
            },
            py::arg("acc"), py::arg("g"), py::arg("scale"), py::arg("flag") = py::none(), doc);
    };
    one("add_scale", MTA_MODE_ADD, false, R"doc(acc += s * g in place, s = scale rounded to acc's dtype.

Pairs (acc, g): (f32, f32), (f32, f16), (f32, bf16), (f64, f64), (f64, f32), and a bf16 acc
(summed in float32, rounded to nearest) with f32, f16 or bf16 g.
flag, an int32 array of shape (1,), is set to 1 when g holds inf or nan.)doc");
    one("copy_scale", MTA_MODE_COPY, false, R"doc(acc = s * g in place (the first micro-batch of a window).)doc");
    one("cast_add_scale", MTA_MODE_ADD, true,
        R"doc(acc(f32 or bf16) += s * float(g) for a float16 or bfloat16 g, in one pass.)doc");

    const auto compensated = [&m, plain](const char* name, int mode, const char* doc) {
        m.def(
            name,
            [name, mode, plain](py::handle acc, py::handle comp, py::handle g, double scale, py::handle flag) {
                accumulate_one(name, plain(mode, scale), false, acc, comp, g, py::handle(), flag);
            },
            py::arg("acc"), py::arg("comp"), py::arg("g"), py::arg("scale"), py::arg("flag") = py::none(), doc);
    };
    compensated("add_scale_compensated", MTA_MODE_ADD_COMPENSATED,
                R"doc(Neumaier summation of s * g into (acc, comp); acc + comp is the running sum.)doc");
    compensated("copy_scale_compensated", MTA_MODE_COPY_COMPENSATED, R"doc(acc = s * g and comp = 0.)doc");

    const auto stochastic = [&m](const char* name, int mode, bool cast_only, const char* doc) {
        m.def(
            name,
            [name, mode, cast_only](py::handle acc, py::handle g, double scale, py::handle seed, py::handle window,
                                    py::handle micro_batch, py::handle offset, py::handle flag) {
                const AccumulateCall call{mode, false, scale, stream_key(name, seed, window, micro_batch)};
                accumulate_one(name, call, cast_only, acc, py::handle(), g, offset, flag);
            },
            py::arg("acc"), py::arg("g"), py::arg("scale"), py::arg("seed"), py::arg("window"),
            py::arg("micro_batch"), py::arg("offset") = 0, py::arg("flag") = py::none(), doc);
    };
    stochastic("add_scale_stochastic", MTA_MODE_ADD_STOCHASTIC, false,
               R"doc(acc(bf16) = SR(float(acc) + s * g): summed in float32, rounded up with probability the
discarded fraction; element i's random bits are those of stream index offset + i of Philox4x32-10
keyed by seed at (window, micro_batch).)doc");
    stochastic("copy_scale_stochastic", MTA_MODE_COPY_STOCHASTIC, false, R"doc(acc(bf16) = SR(s * g).)doc");
    stochastic("cast_add_scale_stochastic", MTA_MODE_ADD_STOCHASTIC, true,
               R"doc(add_scale_stochastic for a float16 or bfloat16 g.)doc");

    const auto many = [&m, plain](const char* name, int mode, bool cast_only, const char* doc) {
        m.def(
            name,
            [name, mode, cast_only, plain](py::handle accs, py::handle gs, double scale, py::handle flag) {
                accumulate_many(name, plain(mode, scale), cast_only, accs, py::handle(), gs, py::none(), flag);
            },
            py::arg("accs"), py::arg("gs"), py::arg("scale"), py::arg("flag") = py::none(), doc);
    };
    many("multi_add_scale", MTA_MODE_ADD, false,
         R"doc(add_scale over lists of (acc, g) pairs of mixed sizes and dtypes, in one call.)doc");
    many("multi_copy_scale", MTA_MODE_COPY, false, R"doc(copy_scale over lists, in one call.)doc");
    many("multi_cast_add_scale", MTA_MODE_ADD, true, R"doc(cast_add_scale over lists, in one call.)doc");

    const auto many_compensated = [&m, plain](const char* name, int mode, const char* doc) {
        m.def(
            name,
            [name, mode, plain](py::handle accs, py::handle comps, py::handle gs, double scale, py::handle flag) {
                accumulate_many(name, plain(mode, scale), false, accs, comps, gs, py::none(), flag);
            },
            py::arg("accs"), py::arg("comps"), py::arg("gs"), py::arg("scale"), py::arg("flag") = py::none(),
            doc);
    };
    many_compensated("multi_add_scale_compensated", MTA_MODE_ADD_COMPENSATED,
                     R"doc(add_scale_compensated over lists, in one call.)doc");
    many_compensated("multi_copy_scale_compensated", MTA_MODE_COPY_COMPENSATED,
                     R"doc(copy_scale_compensated over lists, in one call.)doc");

    const auto many_stochastic = [&m](const char* name, int mode, bool cast_only, const char* doc) {
        m.def(
            name,
            [name, mode, cast_only](py::handle accs, py::handle gs, double scale, py::handle seed, py::handle window,
                                    py::handle micro_batch, py::handle offsets, py::handle flag) {
                const AccumulateCall call{mode, false, scale, stream_key(name, seed, window, micro_batch)};
                accumulate_many(name, call, cast_only, accs, py::handle(), gs, offsets, flag);
            },
            py::arg("accs"), py::arg("gs"), py::arg("scale"), py::arg("seed"), py::arg("window"),
            py::arg("micro_batch"), py::arg("offsets") = py::none(), py::arg("flag") = py::none(), doc);
    };
    many_stochastic("multi_add_scale_stochastic", MTA_MODE_ADD_STOCHASTIC, false,
                    R"doc(add_scale_stochastic over lists; offsets[i] is accs[i]'s first stream index (None:
the list numbered as one array, each tensor starting where the one before ended).)doc");
    many_stochastic("multi_copy_scale_stochastic", MTA_MODE_COPY_STOCHASTIC, false,
                    R"doc(copy_scale_stochastic over lists, in one call.)doc");
    many_stochastic("multi_cast_add_scale_stochastic", MTA_MODE_ADD_STOCHASTIC, true,
                    R"doc(cast_add_scale_stochastic over lists, in one call.)doc");
}

}  // namespace minitorch_accum

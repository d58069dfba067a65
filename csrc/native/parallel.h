// How the native kernels split work across threads and read their inputs.
//
// Work is a list of independent tasks (a span of one array, or one 64K-element
// chunk of one tensor of a list) run by the calling thread and the helpers of
// a small pool (thread_pool.cpp): each thread drains its own contiguous block
// of tasks, then takes what is left of the others'. The caller starts at once
// and returns when every task is done; it never waits for a helper that has
// not started. OpenMP's fork-join barrier did wait for it: with one other busy
// process on a 2-core machine, a helper whose core that process held stalled
// each pass for up to a scheduler time slice (add_scale on 2^20 elements:
// 5.1 GB/s with libgomp, 34.8 GB/s with this pool; 2^22: 7.3 vs 35.9; alone
// on the machine both give the same figures within noise). Idle helpers spin
// for 1 ms (MTA_POOL_SPIN_US), then sleep, so they neither hold a core another process needs
// for long nor lose the scheduler's wake-up preference.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "accum_math.cuh"

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

// Below this many elements a kernel runs on the calling thread alone: waking
// a helper costs a few microseconds, more than such a pass takes.
constexpr std::int64_t kParallelMinElements = std::int64_t(1) << 15;

// True in a process forked after this module loaded (see fork_safety.cpp).
bool in_forked_child();

// Whether a pass over n elements should ask the pool's helpers to join.
inline bool use_threads(std::int64_t n) { return n >= kParallelMinElements && !in_forked_child(); }

// Threads a parallel pass may use, the caller included (MTA_NUM_THREADS, else
// OMP_NUM_THREADS, else the CPUs this process may run on).
int worker_threads();

// Threads a pass uses now, the caller included: set_thread_limit's value (1 runs
// every pass on the calling thread), at most worker_threads(); worker_threads()
// until it is set, or after set_thread_limit(0).
int thread_limit();
void set_thread_limit(int threads);

// A task: runs task `index` of the job `context` describes; its result is ORed
// into the call's (the non-finite flag).
typedef bool (*TaskFunction)(void* context, std::int64_t index);

// Runs task(context, i) for every i in [0, count) exactly once, on the calling
// thread and, when `parallel`, on whichever pool helpers are free to join.
// Returns the OR of the tasks' results. Thread-safe: a second caller while the
// pool is busy runs its tasks on its own thread.
bool run_tasks(std::int64_t count, TaskFunction task, void* context, bool parallel);

// Hands task(context, 0) to a pool helper and returns at once: true when it did (the caller
// must call finish_background before it reads or frees what the task touches, and until then
// its own passes run on its own thread), false when it could not (one thread, the pool busy, a
// forked child): the task has not run, and the caller runs it. One at a time, from one thread.
bool start_background(TaskFunction task, void* context);

// Waits for the task start_background handed over (the caller runs it if no helper took it
// yet); nothing when none is in flight.
void finish_background();

// body(i) for i in [0, count); `elements` (the whole job's size) decides
// whether helpers are worth waking.
template <class Body>
bool for_each_task(std::int64_t count, std::int64_t elements, Body&& body) {
    using B = std::remove_reference_t<Body>;
    const TaskFunction task = [](void* context, std::int64_t index) -> bool {
        return (*static_cast<B*>(context))(index);
    };
    return run_tasks(count, task, const_cast<void*>(static_cast<const void*>(&body)), use_threads(elements));
}

// Runs body(begin, end) over [0, n) in spans and ORs their results. Spans start
// on 16-element boundaries (each keeps the array's SIMD alignment) and are
// small enough that every thread gets several (the faster thread takes more),
// large enough (<= 64K elements, 256 KiB of fp32) that claiming one is free.
template <class Body>
bool for_each_span(std::int64_t n, Body body) {
    if (!use_threads(n)) return n > 0 && body(std::int64_t(0), n);
    const std::int64_t target = n / (4 * std::int64_t(worker_threads()));
    const std::int64_t span = std::clamp<std::int64_t>((target + 15) & ~std::int64_t(15), 4096, 65536);
    const std::int64_t count = (n + span - 1) / span;
    return for_each_task(count, n, [&](std::int64_t t) {
        const std::int64_t begin = t * span;
        return body(begin, std::min(n, begin + span));
    });
}

}  // namespace minitorch_accum

// The native kernels' thread pool (see parallel.h for why it replaced OpenMP).
//
// One job at a time: the caller publishes it, wakes the helpers, and claims
// tasks itself. A helper that wakes after the last task was claimed finds
// nothing and goes back to waiting; the caller never waits for a helper that
// has not started, only for tasks a running helper has claimed and not
// finished. No lock or allocation on the way of a call: the job lives on the
// caller's stack, published through an atomic pointer.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "native/parallel.h"

namespace minitorch_accum {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Spins for up to `limit` until ready() holds; returns ready().
template <class Ready>
bool spin_for(std::chrono::microseconds limit, Ready ready) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (int i = 1;; ++i) {
        if (ready()) return true;
        cpu_relax();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() > until) return ready();
    }
}

int positive_env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr) return 0;
    const long n = std::strtol(value, nullptr, 10);  // "4,2" (nested OpenMP levels) reads as 4
    return n > 0 && n < 4096 ? static_cast<int>(n) : 0;
}

// How long an idle helper polls before it sleeps: MTA_POOL_SPIN_US microseconds
// (0 to 100000; anything else is ignored), else 1000 (the Pool says why).
std::chrono::microseconds helper_spin() {
    constexpr long kDefault = 1000, kMost = 100000;
    const char* value = std::getenv("MTA_POOL_SPIN_US");
    if (value != nullptr && *value != '\0') {
        char* end = nullptr;
        const long n = std::strtol(value, &end, 10);
        if (*end == '\0' && n >= 0 && n <= kMost) return std::chrono::microseconds(n);
    }
    return std::chrono::microseconds(kDefault);
}

int available_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
}

// A job's tasks are cut into one contiguous block per thread. Each thread
// first drains its own block (so, call after call, a thread touches the same
// part of an array and finds it in its own cache, as with a static schedule),
// then takes what is left of the others' blocks (so no thread waits for one
// that has not started).
struct alignas(64) Block {
    std::atomic<std::int64_t> next{0};
    std::int64_t end = 0;
};

constexpr int kMaxThreads = 256;

struct Job {
    TaskFunction task;
    void* context;
    std::int64_t count;
    int blocks;
    Block* block;
    std::atomic<std::int64_t> done{0};
    std::atomic<bool> found{false};
};

class Pool {
public:
    explicit Pool(int helpers) : helpers_(std::min(helpers, kMaxThreads - 1)) {
        for (int i = 1; i <= helpers_; ++i) std::thread([this, i] { serve(i); }).detach();
    }

    bool run(std::int64_t count, TaskFunction task, void* context) {
        // One job at a time; a concurrent caller (another Python thread) already
        // has its own core to run on.
        if (helpers_ == 0 || busy_.exchange(true, std::memory_order_acquire)) return serial(count, task, context);
        Job job;
        job.task = task;
        job.context = context;
        job.count = count;
        // the caller and at most limit - 1 helpers: a helper whose slot is past the blocks skips the job
        const int limit = std::min(helpers_ + 1, std::max(1, thread_limit()));
        job.blocks = static_cast<int>(std::min<std::int64_t>(limit, count));
        job.block = blocks_;
        for (int b = 0; b < job.blocks; ++b) {
            blocks_[b].next.store(count * b / job.blocks, std::memory_order_relaxed);
            blocks_[b].end = count * (b + 1) / job.blocks;
        }
        publish(job);
        work_on(job, 0);
        retire(job);  // the job lives on this stack
        busy_.store(false, std::memory_order_release);
        return job.found.load(std::memory_order_relaxed);
    }

    // One task handed to a helper while the caller goes on (see start_background in parallel.h).
    // The pool counts as busy until finish_background: a pass the caller runs meanwhile runs on
    // its own thread, beside the helper, instead of waiting for it.
    bool start_background(TaskFunction task, void* context) {
        if (helpers_ == 0 || background_ || busy_.exchange(true, std::memory_order_acquire)) return false;
        Job& job = background_job_;
        job.task = task;
        job.context = context;
        job.count = 1;
        job.blocks = 2;  // the caller's block is empty; helper 1's holds the task (others skip the job)
        job.block = blocks_;
        job.done.store(0);
        job.found.store(false);
        blocks_[0].next.store(0, std::memory_order_relaxed);
        blocks_[0].end = 0;
        blocks_[1].next.store(0, std::memory_order_relaxed);
        blocks_[1].end = 1;
        background_ = true;
        publish(job);
        return true;
    }

    void finish_background() {
        if (!background_) return;
        Job& job = background_job_;
        work_on(job, 0);  // a helper that has not woken yet leaves the task to the caller
        retire(job);
        background_ = false;
        busy_.store(false, std::memory_order_release);
    }

    static bool serial(std::int64_t count, TaskFunction task, void* context) {
        bool found = false;
        for (std::int64_t i = 0; i < count; ++i) found |= task(context, i);
        return found;
    }

private:
    // Makes `job` the current one and wakes the helpers that sleep.
    void publish(Job& job) {
        current_.store(&job);  // seq_cst, as every handshake below (see serve)
        generation_.fetch_add(1);
        if (sleepers_.load() > 0) {
            { std::lock_guard<std::mutex> lock(mutex_); }  // a helper between its check and its wait gets there
            wake_.notify_all();
        }
    }

    // Waits until every task of `job` is done and no helper looks at it any more (then its memory
    // may go). Only tasks a helper claimed and has not finished remain: spin briefly (a task is at
    // most 64K elements, tens of microseconds), then sleep: if another process preempted that
    // helper, an idle core is what lets the scheduler move the helper here and finish the task at
    // once (a spinning or yielding caller would keep it waiting for a time slice).
    void retire(Job& job) {
        const auto finished = [&] { return job.done.load() >= job.count; };
        if (!spin_for(kCallerSpin, finished)) {
            std::unique_lock<std::mutex> lock(mutex_);
            caller_sleeping_.store(true);
            finished_.wait(lock, finished);
            caller_sleeping_.store(false);
        }
        current_.store(nullptr);
        while (attached_.load() > 0) {
            if (!spin_for(kCallerSpin, [&] { return attached_.load() == 0; })) {
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        }
    }

    // After a job a helper polls for the next one for helper_spin() (1 ms unless
    // MTA_POOL_SPIN_US says otherwise), then sleeps. A micro-batch's parallel passes
    // come a few hundred microseconds apart (its Python and one-thread kernels run
    // between two GEMMs): a helper that slept after 50 us woke for the next GEMM only
    // after the caller had claimed both halves of it, and 2 threads took 0.95x of
    // 1 thread's time on the char transformer (replayed, b = 32: 12.4-12.9 ms against
    // 12.3); polling 1 ms, 10.3-10.7 ms (0.5-3 ms gave the same within noise). libgomp
    // polls for milliseconds too; the price is up to 1 ms of a core after the last
    // pass, which another process on a shared machine may have wanted.
    static constexpr auto kCallerSpin = std::chrono::microseconds(20);
    const std::chrono::microseconds helper_spin_ = helper_spin();

    // Thread `slot` (0 = the caller) claims tasks until none is left.
    // Tasks are counted as done once per thread and job, not once per task:
    // the counter's cache line then moves between cores twice per call.
    void work_on(Job& job, int slot) {
        std::int64_t finished = 0;
        bool found = false;
        for (int k = 0; k < job.blocks; ++k) {
            Block& b = job.block[(slot + k) % job.blocks];
            for (;;) {
                const std::int64_t i = b.next.fetch_add(1, std::memory_order_relaxed);
                if (i >= b.end) break;
                found |= job.task(job.context, i);
                ++finished;
            }
        }
        if (finished == 0) return;
        // the flag is set before the tasks count as done, so the caller sees it
        if (found) job.found.store(true, std::memory_order_relaxed);
        if (job.done.fetch_add(finished) + finished == job.count && caller_sleeping_.load()) {
            { std::lock_guard<std::mutex> lock(mutex_); }
            finished_.notify_one();
        }
    }

    // The handshakes are seq_cst pairs of "write mine, then read yours", so one
    // side always sees the other: a helper attaches before reading current_ and
    // the caller clears current_ before reading attached_ (neither returns
    // while the other uses the job); a helper counts itself asleep before its
    // last look at generation_ and the caller bumps generation_ before reading
    // sleepers_ (no lost wake-up); likewise caller_sleeping_ and done.
    void serve(int slot) {
        std::uint64_t seen = 0;
        for (;;) {
            if (!spin_for(helper_spin_, [&] { return generation_.load(std::memory_order_relaxed) != seen; })) {
                std::unique_lock<std::mutex> lock(mutex_);
                sleepers_.fetch_add(1);
                wake_.wait(lock, [&] { return generation_.load() != seen; });
                sleepers_.fetch_sub(1);
            }
            seen = generation_.load();
            attached_.fetch_add(1);
            if (Job* job = current_.load()) {
                if (slot < job->blocks) work_on(*job, slot);
            }
            attached_.fetch_sub(1);
        }
    }

    Block blocks_[kMaxThreads];
    std::atomic<Job*> current_{nullptr};
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> attached_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_sleeping_{false};
    std::atomic<bool> busy_{false};
    Job background_job_;
    bool background_ = false;  // read and written by the thread that starts and finishes it
    std::mutex mutex_;
    std::condition_variable wake_;      // helpers: a new generation
    std::condition_variable finished_;  // the caller: the last task is done
    const int helpers_;
};

// set_thread_limit's value; 0 means worker_threads() (the pool's size).
std::atomic<int> g_thread_limit{0};

// Created on the first parallel pass and never destroyed: its detached helpers
// sleep until the process exits (a static destructor would race with them).
Pool& pool() {
    static Pool* instance = new Pool(worker_threads() - 1);
    return *instance;
}

}  // namespace

int worker_threads() {
    static const int threads = [] {
        int n = positive_env("MTA_NUM_THREADS");
        if (n == 0) n = positive_env("OMP_NUM_THREADS");
        return n > 0 ? n : available_cpus();
    }();
    return threads;
}

int thread_limit() {
    const int n = g_thread_limit.load(std::memory_order_relaxed);
    return n > 0 ? std::min(n, worker_threads()) : worker_threads();
}

void set_thread_limit(int threads) { g_thread_limit.store(std::max(0, threads), std::memory_order_relaxed); }

bool start_background(TaskFunction task, void* context) {
    if (thread_limit() < 2 || in_forked_child()) return false;
    return pool().start_background(task, context);
}

void finish_background() {
    if (in_forked_child()) return;
    pool().finish_background();
}

bool run_tasks(std::int64_t count, TaskFunction task, void* context, bool parallel) {
    if (count <= 0) return false;
    if (!parallel || count == 1 || thread_limit() < 2 || in_forked_child()) {
        return Pool::serial(count, task, context);
    }
    return pool().run(count, task, context);
}

}  // namespace minitorch_accum

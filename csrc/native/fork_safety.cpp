// A thread pool does not survive fork(): a forked child (a data-loader worker,
// say) has none of its parent's helper threads, and the pool's mutex may have
// been held by one of them at the fork. A child therefore runs every native
// kernel on its calling thread and never touches the pool (thread_pool.cpp).
#include <atomic>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

#include "native/parallel.h"

namespace minitorch_accum {

namespace {

std::atomic<bool> forked_child{false};

#if defined(__unix__) || defined(__APPLE__)
void on_fork_in_child() { forked_child.store(true, std::memory_order_relaxed); }

const int registered = pthread_atfork(nullptr, nullptr, on_fork_in_child);
#endif

}  // namespace

bool in_forked_child() { return forked_child.load(std::memory_order_relaxed); }

}  // namespace minitorch_accum

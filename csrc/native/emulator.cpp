// CPU launch emulator: runs the CUDA __global__ kernels themselves for a
// given grid and block, so the exact GPU source is executed on machines
// without a GPU.
//
// Blocks run one after another on the calling OS thread, under a mutex (the
// kernels' __shared__ arrays are function-local statics, see
// cuda_emulation.h). Within a block, a kernel that never synchronizes runs its
// threads as plain calls in threadIdx order; a kernel that calls
// __syncthreads() runs each thread as a ucontext fiber. The scheduler resumes
// the block's fibers in order; each runs until it reaches the barrier (or
// returns) and switches back. When every live fiber has arrived, the next
// round resumes them all, which is exactly a block-wide barrier.
#include <ucontext.h>

#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "native/bindings.h"
#include "native/cuda_emulation.h"
#include "native/emulator.h"

minitorch_accum::emulator::Dim3 threadIdx;
minitorch_accum::emulator::Dim3 blockIdx;
minitorch_accum::emulator::Dim3 blockDim;
minitorch_accum::emulator::Dim3 gridDim;

namespace minitorch_accum::emulator {

namespace {

// Kernels keep little on the stack; exceptions unwinding inside a fiber need
// a few pages more.
constexpr std::size_t kFiberStackBytes = 64 * 1024;

struct BlockState {
    const Invocation* invoke = nullptr;
    unsigned threads = 0;
    bool fibers = false;
    unsigned current = 0;
    bool aborting = false;
    std::exception_ptr error;
    ucontext_t scheduler;
    std::vector<ucontext_t> contexts;
    std::vector<std::unique_ptr<char[]>> stacks;
    std::vector<unsigned char> finished;
};

BlockState block;
std::mutex launch_mutex;

struct BlockAborted {};

void set_thread_index(unsigned linear) {
    threadIdx.x = linear % blockDim.x;
    threadIdx.y = (linear / blockDim.x) % blockDim.y;
    threadIdx.z = linear / (blockDim.x * blockDim.y);
}

void fiber_main() {
    try {
        (*block.invoke)();
    } catch (const BlockAborted&) {
        // another thread of the block failed first; its error is kept
    } catch (...) {
        if (!block.error) block.error = std::current_exception();
        block.aborting = true;
    }
    block.finished[block.current] = 1;
    // returning resumes uc_link, the scheduler
}

void run_block_with_fibers() {
    const unsigned n = block.threads;
    if (block.stacks.size() < n) {
        block.contexts.resize(n);
        while (block.stacks.size() < n) block.stacks.emplace_back(new char[kFiberStackBytes]);
    }
    block.finished.assign(n, 0);
    for (unsigned i = 0; i < n; ++i) {
        ucontext_t& c = block.contexts[i];
        if (getcontext(&c) != 0) throw std::runtime_error("emulator: getcontext failed");
        c.uc_stack.ss_sp = block.stacks[i].get();
        c.uc_stack.ss_size = kFiberStackBytes;
        c.uc_link = &block.scheduler;
        makecontext(&c, fiber_main, 0);
    }
    unsigned live = n;
    while (live > 0) {
        for (unsigned i = 0; i < n; ++i) {
            if (block.finished[i]) continue;
            block.current = i;
            set_thread_index(i);
            if (swapcontext(&block.scheduler, &block.contexts[i]) != 0) {
                throw std::runtime_error("emulator: swapcontext failed");
            }
            if (block.finished[i]) --live;
        }
    }
}

void run_block_directly() {
    const Invocation& invoke = *block.invoke;
    for (unsigned i = 0; i < block.threads; ++i) {
        block.current = i;
        set_thread_index(i);
        invoke();
    }
}

Dim3 dims(const py::sequence& s, const char* what, const std::string& kernel) {
    if (s.size() < 1 || s.size() > 3) {
        throw py::value_error(kernel + ": " + what + " must have 1 to 3 dimensions");
    }
    Dim3 d;
    unsigned* fields[3] = {&d.x, &d.y, &d.z};
    for (std::size_t i = 0; i < s.size(); ++i) {
        const long long v = s[i].cast<long long>();
        if (v < 1 || v > 0x7fffffffLL) {
            throw py::value_error(kernel + ": " + what + " dimensions must be positive, got " + std::to_string(v));
        }
        *fields[i] = static_cast<unsigned>(v);
    }
    return d;
}

void launch(const std::string& name, const py::sequence& grid, const py::sequence& block_shape,
            const py::sequence& args) {
    auto& kernels = registry();
    const auto found = kernels.find(name);
    if (found == kernels.end()) throw py::key_error("no emulated kernel named " + name);
    const KernelEntry& entry = found->second;
    const Dim3 g = dims(grid, "grid", name);
    const Dim3 b = dims(block_shape, "block", name);
    const unsigned long long threads = 1ull * b.x * b.y * b.z;
    if (threads > entry.max_threads_per_block) {
        throw py::value_error(name + ": a block of " + std::to_string(threads) + " threads exceeds the kernel's " +
                              std::to_string(entry.max_threads_per_block) + " (launch bounds)");
    }
    const Invocation invoke = entry.bind(args);

    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(launch_mutex);
    gridDim = g;
    blockDim = b;
    block.invoke = &invoke;
    block.threads = static_cast<unsigned>(threads);
    block.fibers = entry.uses_barrier && threads > 1;
    block.aborting = false;
    block.error = nullptr;
    for (unsigned z = 0; z < g.z; ++z) {
        for (unsigned y = 0; y < g.y; ++y) {
            for (unsigned x = 0; x < g.x; ++x) {
                blockIdx = Dim3{x, y, z};
                if (block.fibers) {
                    run_block_with_fibers();
                    if (block.error) std::rethrow_exception(block.error);
                } else {
                    run_block_directly();
                }
            }
        }
    }
    block.invoke = nullptr;
}

}  // namespace

std::map<std::string, KernelEntry>& registry() {
    static std::map<std::string, KernelEntry> kernels;
    return kernels;
}

void sync_threads() {
    if (!block.fibers) {
        if (block.threads > 1) {
            throw std::logic_error(
                "__syncthreads() in a kernel registered without barriers: mark it uses_barrier in its .cu list");
        }
        return;
    }
    swapcontext(&block.contexts[block.current], &block.scheduler);
    if (block.aborting) throw BlockAborted{};
}

void bind(py::module_& m) {
    register_accumulate_kernels();
    register_l2_norm_kernels();
    register_optimizer_kernels();
    register_fused_kernels();

    m.def("emulator_launch", &launch, py::arg("kernel"), py::arg("grid"), py::arg("block"), py::arg("args"),
          R"doc(Run a CUDA kernel of csrc/*.cu on the CPU for the given grid and block.

Arguments follow the kernel's C parameters: pointers as integer addresses or
None, numbers as Python/NumPy scalars, structs passed by value as bytes.
Launches are serialized; blocks run one at a time.)doc");
    m.def(
        "emulator_kernels",
        []() {
            py::dict out;
            for (const auto& [name, e] : registry()) {
                out[py::str(name)] = py::make_tuple(e.arity, e.max_threads_per_block, e.uses_barrier);
            }
            return out;
        },
        R"doc(Registered kernels: name -> (arity, max threads per block, uses barrier).)doc");
}

}  // namespace minitorch_accum::emulator

// The bytes of NumPy array buffers and of Python objects allocated while a memory probe is
// open, counted with no Python code on the way of any allocation (Python face:
// minitorch_accum/kernels/memory_counter.py; user: minitorch_accum/accum/memory.py).
//
// Two hooks, each forwarding every call to the allocator it stands in front of:
// - a NEP 49 data-memory handler (NumPy's PyDataMem_Handler) over NumPy's default handler,
//   for array buffers; NumPy makes it current only in the context of an open probe, and an
//   array keeps it to the end, so its functions run, forwarding only, long after;
// - a PyMem allocator hook on the MEM and OBJ domains (PyMem_SetAllocator, as tracemalloc
//   installs one), for Python objects, in place while a probe that counts them is open.
// Both are plain C++: a signal (Ctrl-C) that arrives during an allocation only sets
// CPython's flag, and its Python handler runs at the next bytecode, never inside a hook.
//
// Every counted allocation goes through Counter::allocated and every free through
// Counter::released: an event log (for a memory snapshot, say) is a field of Counter
// filled there and one binding to read it.
#include <pybind11/pybind11.h>

#include <Python.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "native/bindings.h"

namespace minitorch_accum {

namespace {

namespace py = pybind11;

// NumPy's PyDataMemAllocator and PyDataMem_Handler (numpy/ndarraytypes.h, NumPy >= 1.22)
struct DataAllocator {
    void* ctx;
    void* (*malloc)(void* ctx, size_t size);
    void* (*calloc)(void* ctx, size_t count, size_t size);
    void* (*realloc)(void* ctx, void* ptr, size_t size);
    void (*free)(void* ctx, void* ptr, size_t size);
};

struct DataHandler {
    char name[127];
    uint8_t version;
    DataAllocator allocator;
};

enum class Kind { array, object };

struct Block {
    size_t bytes;
    uint64_t serial;  // numbers the allocation, so a probe opened later never counts its free
};

struct Probe {
    uint64_t since = 0;  // allocations numbered above this one are the probe's
    int64_t arrays = 0, array_peak = 0, total = 0, total_peak = 0;
    bool counts_objects = false;
    bool open = false;
};

class Counter {
public:
    // read without the lock: no probe open means nothing to count, only to forward
    std::atomic<int> open_probes{0};
    std::atomic<int> open_object_probes{0};

    void allocated(Kind kind, void* pointer, size_t bytes) {
        if (pointer == nullptr || !counting(kind)) return;
        std::lock_guard<std::mutex> hold(lock_);
        record(kind, pointer, bytes);
    }

    void released(Kind kind, void* pointer) {
        if (pointer == nullptr || !counting(kind)) return;
        std::lock_guard<std::mutex> hold(lock_);
        forget(kind, pointer);
    }

    // realloc under the lock: the old address, once free, may be handed out at once
    template <class Move>
    void* moved(Kind kind, void* pointer, size_t bytes, Move move) {
        if (!counting(kind)) return move();
        std::lock_guard<std::mutex> hold(lock_);
        void* result = move();
        if (result != nullptr) {  // on failure the old block stays, and stays counted
            if (pointer != nullptr) forget(kind, pointer);
            record(kind, result, bytes);
        }
        return result;
    }

    int open(bool counts_objects) {
        std::lock_guard<std::mutex> hold(lock_);
        if (open_probes.load() == 0) {  // blocks of earlier probes concern none from now on
            arrays_.clear();
            objects_.clear();
        }
        size_t slot = 0;
        while (slot < probes_.size() && probes_[slot].open) ++slot;
        if (slot == probes_.size()) probes_.emplace_back();
        Probe& probe = probes_[slot];
        probe = Probe{};
        probe.since = ++serial_;
        probe.counts_objects = counts_objects;
        probe.open = true;
        open_probes.fetch_add(1);
        if (counts_objects) open_object_probes.fetch_add(1);
        return static_cast<int>(slot);
    }

    Probe close(int slot) {
        std::lock_guard<std::mutex> hold(lock_);
        if (slot < 0 || static_cast<size_t>(slot) >= probes_.size() || !probes_[slot].open) {
            throw std::invalid_argument("memory_probe_close: no open probe " + std::to_string(slot));
        }
        Probe result = probes_[slot];
        probes_[slot].open = false;
        open_probes.fetch_sub(1);
        if (result.counts_objects) open_object_probes.fetch_sub(1);
        if (open_probes.load() == 0) {
            arrays_ = {};  // gives the tables' memory back
            objects_ = {};
        }
        return result;
    }

    size_t tracked_blocks() {
        std::lock_guard<std::mutex> hold(lock_);
        return arrays_.size() + objects_.size();
    }

private:
    bool counting(Kind kind) const {
        return (kind == Kind::array ? open_probes : open_object_probes).load(std::memory_order_relaxed) > 0;
    }

    void record(Kind kind, void* pointer, size_t bytes) {
        const uint64_t number = ++serial_;
        (kind == Kind::array ? arrays_ : objects_)[pointer] = Block{bytes, number};
        const auto size = static_cast<int64_t>(bytes);
        for (Probe& probe : probes_) {
            if (!probe.open || (kind == Kind::object && !probe.counts_objects)) continue;
            if (kind == Kind::array) {
                probe.arrays += size;
                if (probe.arrays > probe.array_peak) probe.array_peak = probe.arrays;
            }
            probe.total += size;
            if (probe.total > probe.total_peak) probe.total_peak = probe.total;
        }
    }

    void forget(Kind kind, void* pointer) {
        auto& blocks = kind == Kind::array ? arrays_ : objects_;
        const auto found = blocks.find(pointer);
        if (found == blocks.end()) return;  // allocated before any open probe: none of theirs
        const Block block = found->second;
        blocks.erase(found);
        const auto size = static_cast<int64_t>(block.bytes);
        for (Probe& probe : probes_) {
            if (!probe.open || block.serial <= probe.since || (kind == Kind::object && !probe.counts_objects)) {
                continue;
            }
            if (kind == Kind::array) probe.arrays -= size;
            probe.total -= size;
        }
    }

    std::mutex lock_;
    uint64_t serial_ = 0;
    std::vector<Probe> probes_;
    std::unordered_map<void*, Block> arrays_, objects_;
};

// Never destroyed: arrays are freed through the handler as late as interpreter shutdown,
// which may come after this library's static destructors.
Counter& counter() {
    static Counter* instance = new Counter();
    return *instance;
}

// ------------------------------------------------------------------ NumPy's array buffers
DataAllocator numpy_default{};

void* array_malloc(void*, size_t size) {
    void* pointer = numpy_default.malloc(numpy_default.ctx, size);
    counter().allocated(Kind::array, pointer, size);
    return pointer;
}

void* array_calloc(void*, size_t count, size_t size) {
    void* pointer = numpy_default.calloc(numpy_default.ctx, count, size);
    counter().allocated(Kind::array, pointer, count * size);
    return pointer;
}

void* array_realloc(void*, void* pointer, size_t size) {
    return counter().moved(Kind::array, pointer, size,
                           [&] { return numpy_default.realloc(numpy_default.ctx, pointer, size); });
}

void array_free(void*, void* pointer, size_t size) {
    counter().released(Kind::array, pointer);
    numpy_default.free(numpy_default.ctx, pointer, size);
}

DataHandler counting_handler = {"minitorch_accum_array_bytes", 1,
                                {nullptr, array_malloc, array_calloc, array_realloc, array_free}};

// ------------------------------------------------------------------ Python objects
// the allocator each domain had when the hook went in; the hook's ctx points at its own
PyMemAllocatorEx previous[2];
constexpr PyMemAllocatorDomain hooked_domains[2] = {PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
bool hooked[2] = {false, false};

void* object_malloc(void* ctx, size_t size) {
    auto* next = static_cast<PyMemAllocatorEx*>(ctx);
    void* pointer = next->malloc(next->ctx, size);
    counter().allocated(Kind::object, pointer, size);
    return pointer;
}

void* object_calloc(void* ctx, size_t count, size_t size) {
    auto* next = static_cast<PyMemAllocatorEx*>(ctx);
    void* pointer = next->calloc(next->ctx, count, size);
    counter().allocated(Kind::object, pointer, count * size);
    return pointer;
}

void* object_realloc(void* ctx, void* pointer, size_t size) {
    auto* next = static_cast<PyMemAllocatorEx*>(ctx);
    return counter().moved(Kind::object, pointer, size, [&] { return next->realloc(next->ctx, pointer, size); });
}

void object_free(void* ctx, void* pointer) {
    auto* next = static_cast<PyMemAllocatorEx*>(ctx);
    counter().released(Kind::object, pointer);
    next->free(next->ctx, pointer);
}

// Called with the GIL held (PyMem_SetAllocator's rule).
void hook_objects() {
    for (int d = 0; d < 2; ++d) {
        if (hooked[d]) continue;  // still in the chain (see unhook_objects): never twice
        PyMem_GetAllocator(hooked_domains[d], &previous[d]);
        PyMemAllocatorEx hook = {&previous[d], object_malloc, object_calloc, object_realloc, object_free};
        PyMem_SetAllocator(hooked_domains[d], &hook);
        hooked[d] = true;
    }
}

// A hook installed over ours since (tracemalloc.start() inside a probe) saved ours as its
// previous allocator and will call it: ours then stays in the chain, forwarding only
// (nothing is counted without an open probe), until it is on top again.
void unhook_objects() {
    for (int d = 0; d < 2; ++d) {
        if (!hooked[d]) continue;
        PyMemAllocatorEx current;
        PyMem_GetAllocator(hooked_domains[d], &current);
        if (current.malloc == object_malloc && current.ctx == &previous[d]) {
            PyMem_SetAllocator(hooked_domains[d], &previous[d]);
            hooked[d] = false;
        }
    }
}

}  // namespace

void bind_memory_counter(py::module_& m) {
    m.def(
        "memory_counting_handler",
        [](py::capsule numpy_handler) {
            auto* base = static_cast<DataHandler*>(PyCapsule_GetPointer(numpy_handler.ptr(), "mem_handler"));
            if (base == nullptr) throw py::error_already_set();
            if (base->version != 1) {
                throw std::invalid_argument("memory_counting_handler: NumPy's data-memory handler has version " +
                                            std::to_string(base->version) + ", this module knows version 1");
            }
            if (base->allocator.malloc == array_malloc) {
                throw std::invalid_argument("memory_counting_handler: give NumPy's own handler, not this one");
            }
            if (numpy_default.malloc != nullptr && numpy_default.malloc != base->allocator.malloc) {
                throw std::invalid_argument("memory_counting_handler: already forwarding to another handler");
            }
            numpy_default = base->allocator;
            return py::capsule(static_cast<void*>(&counting_handler), "mem_handler");
        },
        py::arg("numpy_handler"),
        R"doc(A capsule holding the counting data-memory handler, forwarding to ``numpy_handler`` (NumPy's
default handler, the capsule np.core.multiarray.get_handler's C function returns). Make it current
with PyDataMem_SetHandler while a probe is open.)doc");
    m.def(
        "memory_probe_open",
        [](bool count_objects) {
            const int slot = counter().open(count_objects);
            if (count_objects) hook_objects();
            return slot;
        },
        py::arg("count_objects"),
        R"doc(Open a probe: from now on it counts array buffers (allocated through the counting handler)
and, with count_objects, Python objects (PyMem's MEM and OBJ domains); returns its number.)doc");
    m.def(
        "memory_probe_close",
        [](int slot) {
            const Probe probe = counter().close(slot);
            if (counter().open_object_probes.load() == 0) unhook_objects();
            return py::make_tuple(probe.array_peak, probe.total_peak);
        },
        py::arg("probe"),
        R"doc(Close a probe; returns (peak bytes of its arrays alive together, peak of its arrays and Python
objects together; the arrays alone when it did not count objects).)doc");
    m.def(
        "memory_counter_state",
        []() {
            py::dict d;
            d["open_probes"] = counter().open_probes.load();
            d["tracked_blocks"] = counter().tracked_blocks();
            d["objects_hooked"] = hooked[0] || hooked[1];
            return d;
        },
        R"doc(For tests: open probes, blocks being tracked (0 when none is open), whether the Python-object
hook is in the allocator chain.)doc");
}

}  // namespace minitorch_accum

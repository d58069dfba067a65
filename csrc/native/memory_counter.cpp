// The bytes of NumPy array buffers and of Python objects allocated while a memory probe is
// open, counted with no Python code on the way of any allocation (Python face:
// minitorch_accum/kernels/memory_counter.py; user: minitorch_accum/observe/memory.py).
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
// Counter::released. A *watch* (one at a time: a memory timeline, PyTorch's snapshot) is a
// probe that also logs each array event there: address, bytes (+ allocated, - freed), a
// steady_clock time and, when asked, the Python frames that allocated it (code objects and
// lines read through the C API: no Python code runs). The log is drained from Python.
#include <pybind11/pybind11.h>

#include <Python.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "native/bindings.h"

namespace minitorch_accum {

// a namespace of its own: the module is a unity build, so file-local names must not meet
// those of the other sources (the thread pool has a Block too)
namespace memory_counting {

namespace py = pybind11;

namespace {

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

// One frame of the Python stack that allocated an array: its code object (a reference held
// until the log is drained) and line.
struct FrameRecord {
    PyObject* code;
    int line;
};

// One array event of the watch: frames_[first, first + count) made it (allocations only).
struct Event {
    uintptr_t address;
    int64_t bytes;
    int64_t nanoseconds;
    size_t first;
    size_t count;
};

constexpr size_t frame_limit = 32;

int64_t steady_nanoseconds() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The Python frames of the thread allocating, taken before the counter's lock (reading a
// frame may create a frame object, an allocation the object hook counts under that lock).
// Only with the GIL held: NumPy may allocate without it, and then no frame is read.
struct Frames {
    FrameRecord records[frame_limit];
    size_t count = 0;

    void take() {
        if (!PyGILState_Check()) return;
        PyFrameObject* frame = PyEval_GetFrame();  // borrowed
        bool owned = false;
        while (frame != nullptr && count < frame_limit) {
            records[count++] = {reinterpret_cast<PyObject*>(PyFrame_GetCode(frame)), PyFrame_GetLineNumber(frame)};
            PyFrameObject* back = PyFrame_GetBack(frame);  // new reference (the chain keeps it alive)
            if (owned) Py_DECREF(frame);
            frame = back;
            owned = true;
        }
        if (owned && frame != nullptr) Py_DECREF(frame);
    }
};

class Counter {
public:
    // read without the lock: no probe open means nothing to count, only to forward
    std::atomic<int> open_probes{0};
    std::atomic<int> open_object_probes{0};
    std::atomic<int> watch_frames{-1};  // -1: no watch; 0: a watch without frames; 1: with frames
    // set while the accumulation writes the arena (observe.memory.not_counted): what it allocates
    // is left out of every probe and watch, blocks and events alike
    std::atomic<bool> excluded{false};

    void allocated(Kind kind, void* pointer, size_t bytes, Frames* frames = nullptr) {
        if (pointer == nullptr || !counting(kind) || excluded.load(std::memory_order_relaxed)) return;
        std::lock_guard<std::mutex> hold(lock_);
        record(kind, pointer, bytes, frames);
    }

    void released(Kind kind, void* pointer) {
        if (pointer == nullptr || !counting(kind)) return;
        std::lock_guard<std::mutex> hold(lock_);
        forget(kind, pointer);
    }

    // realloc under the lock: the old address, once free, may be handed out at once
    template <class Move>
    void* moved(Kind kind, void* pointer, size_t bytes, Move move, Frames* frames = nullptr) {
        if (!counting(kind)) return move();
        std::lock_guard<std::mutex> hold(lock_);
        void* result = move();
        if (result != nullptr) {  // on failure the old block stays, and stays counted
            if (pointer != nullptr) forget(kind, pointer);
            if (!excluded.load(std::memory_order_relaxed)) record(kind, result, bytes, frames);
        }
        return result;
    }

    // A watch is a probe of arrays that logs their events; one at a time.
    int open_watch(bool frames) {
        int slot = open(false);
        std::lock_guard<std::mutex> hold(lock_);
        if (watch_slot_ >= 0) {
            probes_[slot].open = false;
            open_probes.fetch_sub(1);
            throw std::invalid_argument("memory_watch_open: a watch is open already (one at a time)");
        }
        watch_slot_ = slot;
        watch_frames.store(frames ? 1 : 0);
        return slot;
    }

    // The events logged since the last drain, the log emptied; frames' references handed over.
    void drain(std::vector<Event>& events, std::vector<FrameRecord>& frames) {
        std::lock_guard<std::mutex> hold(lock_);
        events.swap(events_);
        frames.swap(frames_);
        events_.clear();
        frames_.clear();
    }

    void close_watch(int slot) {
        {
            std::lock_guard<std::mutex> hold(lock_);
            if (slot != watch_slot_) throw std::invalid_argument("memory_watch_close: no open watch " +
                                                                 std::to_string(slot));
            watch_slot_ = -1;
            watch_frames.store(-1);
        }
        close(slot);
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

    void record(Kind kind, void* pointer, size_t bytes, Frames* frames) {
        const uint64_t number = ++serial_;
        if (kind == Kind::array && watch_slot_ >= 0) {
            Event event{reinterpret_cast<uintptr_t>(pointer), static_cast<int64_t>(bytes), steady_nanoseconds(),
                        frames_.size(), 0};
            if (frames != nullptr) {
                frames_.insert(frames_.end(), frames->records, frames->records + frames->count);
                event.count = frames->count;
                frames->count = 0;  // the log holds their references now
            }
            events_.push_back(event);
        }
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
        if (kind == Kind::array && watch_slot_ >= 0 && block.serial > probes_[watch_slot_].since) {
            events_.push_back({reinterpret_cast<uintptr_t>(pointer), -static_cast<int64_t>(block.bytes),
                               steady_nanoseconds(), frames_.size(), 0});
        }
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
    int watch_slot_ = -1;
    std::vector<Event> events_;
    std::vector<FrameRecord> frames_;
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

// The frames of an array allocation, when a watch asks for them (released if not logged).
struct WatchFrames {
    Frames frames;
    WatchFrames() {
        if (counter().watch_frames.load(std::memory_order_relaxed) == 1) frames.take();
    }
    ~WatchFrames() {
        for (size_t i = 0; i < frames.count; ++i) Py_DECREF(frames.records[i].code);
    }
};

void* array_malloc(void*, size_t size) {
    WatchFrames watch;
    void* pointer = numpy_default.malloc(numpy_default.ctx, size);
    counter().allocated(Kind::array, pointer, size, &watch.frames);
    return pointer;
}

void* array_calloc(void*, size_t count, size_t size) {
    WatchFrames watch;
    void* pointer = numpy_default.calloc(numpy_default.ctx, count, size);
    counter().allocated(Kind::array, pointer, count * size, &watch.frames);
    return pointer;
}

void* array_realloc(void*, void* pointer, size_t size) {
    WatchFrames watch;
    return counter().moved(Kind::array, pointer, size,
                           [&] { return numpy_default.realloc(numpy_default.ctx, pointer, size); }, &watch.frames);
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

void bind(py::module_& m) {
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
        "memory_watch_open", [](bool frames) { return counter().open_watch(frames); }, py::arg("frames"),
        R"doc(Open the watch: a probe of array buffers that also logs each allocation and each free of
those (with the allocating Python frames when ``frames``); returns its number. One at a time.)doc");
    m.def(
        "memory_watch_drain",
        []() {
            std::vector<Event> events;
            std::vector<FrameRecord> frames;
            counter().drain(events, frames);
            py::list out;
            for (const Event& event : events) {
                py::tuple stack(event.count);
                for (size_t i = 0; i < event.count; ++i) {
                    const FrameRecord& record = frames[event.first + i];
                    py::handle code(record.code);
                    stack[i] = py::make_tuple(code.attr("co_filename"), record.line, code.attr("co_qualname"));
                }
                out.append(py::make_tuple(static_cast<double>(event.nanoseconds) * 1e-9,
                                          static_cast<unsigned long long>(event.address), event.bytes, stack));
            }
            for (const FrameRecord& record : frames) Py_DECREF(record.code);
            return out;
        },
        R"doc(The watch's events since the last drain, oldest first, the log emptied: (seconds on the
steady clock of memory_clock_seconds, address, +bytes allocated or -bytes freed, frames innermost
first as (file, line, qualified name); frames are empty for frees and without ``frames``).)doc");
    m.def(
        "memory_watch_close", [](int slot) { counter().close_watch(slot); }, py::arg("watch"),
        R"doc(Close the watch (drain it first: what is left in the log stays there for the next drain).)doc");
    m.def(
        "memory_exclude", [](bool on) { counter().excluded.store(on); }, py::arg("on"),
        R"doc(While on, allocations are left out of every probe and watch (the arena's writes).)doc");
    m.def(
        "memory_clock_seconds", []() { return static_cast<double>(steady_nanoseconds()) * 1e-9; },
        R"doc(The steady clock the watch's events are timed by, in seconds.)doc");
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

}  // namespace memory_counting

void bind_memory_counter(pybind11::module_& m) { memory_counting::bind(m); }

}  // namespace minitorch_accum

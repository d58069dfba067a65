// The CPU launch emulator's kernel registry: each CUDA kernel, compiled from
// its .cu file by the host compiler, registered under its extern "C" name
// with an argument binder that turns Python launch arguments into the C
// parameters (see kernels/emulator.py for the Python side).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace minitorch_accum::emulator {

namespace py = pybind11;

// One GPU thread's call of the kernel with bound arguments.
using Invocation = std::function<void()>;

struct KernelEntry {
    std::function<Invocation(const py::sequence&)> bind;
    std::size_t arity = 0;
    unsigned max_threads_per_block = 1024;
    bool uses_barrier = false;  // runs its threads as fibers so __syncthreads() can switch
};

std::map<std::string, KernelEntry>& registry();

// Pointers come as integers (addresses) or None; floating and integer
// scalars as Python or NumPy numbers; structs passed by value as bytes of
// exactly sizeof(T) (kernels/emulator.py converts the CuPy-style arguments).
template <class T>
T argument(py::handle h, const char* kernel, std::size_t index) {
    try {
        if constexpr (std::is_pointer_v<T>) {
            if (h.is_none()) return nullptr;
            return reinterpret_cast<T>(static_cast<std::uintptr_t>(h.cast<unsigned long long>()));
        } else if constexpr (std::is_floating_point_v<T>) {
            return static_cast<T>(h.cast<double>());
        } else if constexpr (std::is_integral_v<T>) {
            return h.cast<T>();
        } else {
            static_assert(std::is_trivially_copyable_v<T>, "by-value kernel arguments must be plain structs");
            if (!py::isinstance<py::bytes>(h)) throw py::cast_error("expected bytes");
            const std::string bytes = h.cast<std::string>();
            if (bytes.size() != sizeof(T)) {
                throw py::value_error(std::string(kernel) + ": argument " + std::to_string(index) + " has " +
                                      std::to_string(bytes.size()) + " bytes, the kernel's struct has " +
                                      std::to_string(sizeof(T)));
            }
            T value;
            std::memcpy(&value, bytes.data(), sizeof(T));
            return value;
        }
    } catch (const py::cast_error&) {
        throw py::type_error(std::string(kernel) + ": cannot convert argument " + std::to_string(index) + " (" +
                             std::string(py::str(py::type::of(h).attr("__qualname__"))) + ")");
    }
}

template <class... Args, std::size_t... I>
std::tuple<std::decay_t<Args>...> arguments(const py::sequence& args, const char* kernel,
                                            std::index_sequence<I...>) {
    return std::tuple<std::decay_t<Args>...>{argument<std::decay_t<Args>>(args[I], kernel, I)...};
}

template <class... Args>
KernelEntry make_entry(const char* name, void (*kernel)(Args...), unsigned max_threads, bool uses_barrier) {
    KernelEntry e;
    e.arity = sizeof...(Args);
    e.max_threads_per_block = max_threads;
    e.uses_barrier = uses_barrier;
    e.bind = [name, kernel](const py::sequence& args) -> Invocation {
        if (args.size() != sizeof...(Args)) {
            throw py::type_error(std::string(name) + " takes " + std::to_string(sizeof...(Args)) +
                                 " arguments, got " + std::to_string(args.size()));
        }
        auto values = arguments<Args...>(args, name, std::index_sequence_for<Args...>{});
        return [kernel, values]() { std::apply(kernel, values); };
    };
    return e;
}

#define MTA_REGISTER_KERNEL(name, max_threads, uses_barrier) \
    ::minitorch_accum::emulator::registry()[#name] =         \
        ::minitorch_accum::emulator::make_entry(#name, &name, max_threads, uses_barrier);

// One per .cu file (emulate_*.cpp).
void register_accumulate_kernels();
void register_l2_norm_kernels();
void register_optimizer_kernels();
void register_fused_kernels();

}  // namespace minitorch_accum::emulator

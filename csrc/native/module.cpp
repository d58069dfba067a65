// minitorch_accum._native: the CPU fast path of the accumulation kernels and
// the launch emulator that runs their CUDA source on the CPU.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdlib>

#include "accum_math.cuh"
#include "multi_tensor.cuh"
#include "native/bindings.h"
#include "native/parallel.h"

namespace minitorch_accum {

namespace {

namespace py = pybind11;

template <int DEPTH>
py::dict table_layout() {
    using T = MtaTensorTable<DEPTH>;
    py::dict d;
    d["itemsize"] = sizeof(T);
    d["max_tensors"] = T::max_tensors;
    d["addresses"] = offsetof(T, addresses);
    d["sizes"] = offsetof(T, sizes);
    d["kinds"] = offsetof(T, kinds);
    d["block_to_tensor"] = offsetof(T, block_to_tensor);
    d["block_to_chunk"] = offsetof(T, block_to_chunk);
    return d;
}

// The size of a scalars struct and the offset of each field, by name.
template <class S>
py::dict scalars_layout() {
    py::dict d;
    d["itemsize"] = sizeof(S);
    const S s{};
    S::for_each_field([&](const char* name, auto member) {
        d[name] = reinterpret_cast<const char*>(&(s.*member)) - reinterpret_cast<const char*>(&s);
    });
    return d;
}

}  // namespace

void bind_environment(py::module_& m) {
    m.def("set_threads", &set_thread_limit, py::arg("threads"),
          R"doc(Threads a parallel pass may use from now on, the caller included (1: every pass on the calling
thread; 0: the pool's size again). At most the pool's size, which MTA_NUM_THREADS, else OMP_NUM_THREADS, else
the CPUs this process may run on fix when the first parallel pass starts it.)doc");
    m.def("threads", &thread_limit, R"doc(Threads a parallel pass uses now, the caller included.)doc");
    m.def("max_threads", &worker_threads, R"doc(The pool's size, the caller included: the most set_threads allows.)doc");
    m.def(
        "getenv",
        [](const char* name) -> py::object {
            const char* value = std::getenv(name);
            return value != nullptr ? py::object(py::str(value)) : py::object(py::none());
        },
        py::arg("name"),
        R"doc(The process environment's value of name, or None: what os.environ holds too, since os.environ
writes every change through putenv, but without os.environ.get's KeyError path for an unset name (about
0.8 us, more than a small kernel call; the kernel path is read from MTA_KERNELS at every call).)doc");
}

void bind_layout(py::module_& m) {
    m.def(
        "layout",
        []() {
            py::dict d;
            d["chunk_size"] = MTA_CHUNK_SIZE;
            d["multi_tensor_block"] = MTA_MT_BLOCK;
            d["max_blocks"] = MTA_MT_MAX_BLOCKS;
            py::dict tables;
            tables[py::int_(1)] = table_layout<1>();
            tables[py::int_(2)] = table_layout<2>();
            tables[py::int_(3)] = table_layout<3>();
            tables[py::int_(4)] = table_layout<4>();
            d["tables"] = tables;
            d["sgd_f32"] = scalars_layout<MtaSgdScalars<float>>();
            d["sgd_f64"] = scalars_layout<MtaSgdScalars<double>>();
            d["adam_f32"] = scalars_layout<MtaAdamScalars<float>>();
            d["adam_f64"] = scalars_layout<MtaAdamScalars<double>>();
            py::dict kinds;
            kinds["f32_f32"] = int(MTA_KIND_F32_F32);
            kinds["f32_f16"] = int(MTA_KIND_F32_F16);
            kinds["f32_bf16"] = int(MTA_KIND_F32_BF16);
            kinds["f64_f64"] = int(MTA_KIND_F64_F64);
            kinds["f64_f32"] = int(MTA_KIND_F64_F32);
            kinds["bf16_f32"] = int(MTA_KIND_BF16_F32);
            kinds["bf16_f16"] = int(MTA_KIND_BF16_F16);
            kinds["bf16_bf16"] = int(MTA_KIND_BF16_BF16);
            d["kinds"] = kinds;
            py::dict dtypes;
            dtypes["f32"] = int(MTA_DTYPE_F32);
            dtypes["f16"] = int(MTA_DTYPE_F16);
            dtypes["bf16"] = int(MTA_DTYPE_BF16);
            dtypes["f64"] = int(MTA_DTYPE_F64);
            d["dtypes"] = dtypes;
            return d;
        },
        R"doc(Sizes and field offsets of the structs the CUDA kernels take by value, and the
launch constants, so the Python launch planner can check its NumPy mirrors.)doc");
}

}  // namespace minitorch_accum

PYBIND11_MODULE(_native, m) {
    m.doc() = R"doc(Native CPU kernels of minitorch_accum (SIMD loops on a small thread pool, GIL released) and the
CPU launch emulator of its CUDA kernels. Private: use minitorch_accum.kernels.)doc";
#define MTA_CALL_BIND(name) minitorch_accum::bind_##name(m);
    MTA_NATIVE_PIECES(MTA_CALL_BIND)
#undef MTA_CALL_BIND
    minitorch_accum::emulator::bind(m);
}

// Native embedding backward: the gradient rows of each id added into its table row in the
// order they come (the order of NumPy's np.add.at), by a counting sort of the ids: each
// table row then sums its own list, so rows run in parallel and the result never depends
// on the number of threads.
#include <cstdint>
#include <optional>
#include <vector>

#include "accum_math.cuh"
#include "native/bindings.h"
#include "native/fused_args.h"
#include "native/parallel.h"

namespace minitorch_accum {

namespace {

template <class T>
void sum_rows(const std::int64_t* order, const std::int64_t* offsets, const T* grad, T* out, std::int64_t begin,
              std::int64_t end, std::int64_t dim) {
    for (std::int64_t v = begin; v < end; ++v) {
        T* __restrict row = out + v * dim;
        for (std::int64_t j = 0; j < dim; ++j) row[j] = T(0);
        for (std::int64_t k = offsets[v]; k < offsets[v + 1]; ++k) {
            const T* __restrict g = grad + order[k] * dim;
#pragma omp simd
            for (std::int64_t j = 0; j < dim; ++j) row[j] = mta_add(row[j], g[j]);
        }
    }
}

void embedding_backward(py::handle ids, py::handle grad, py::handle out) {
    const char* kernel = "embedding_backward";
    const FusedArgs args(kernel, {{"ids", ids, false}, {"grad", grad, false}, {"out", out, true}}, {"grad", "out"},
                         {}, {"ids"});
    args.axes("ids", 1);
    args.axes("grad", 2);
    args.axes("out", 2);
    const std::int64_t n = args["ids"].shape(0), rows = args["out"].shape(0), dim = args["out"].shape(1);
    args.shape("grad", {n, dim}, "out");
    args.disjoint();
    const auto* id = static_cast<const std::int64_t*>(args.data("ids"));
    check_ids(kernel, id, n, rows);
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(rows) + 1, 0);
    for (std::int64_t i = 0; i < n; ++i) ++offsets[id[i] + 1];
    for (std::int64_t v = 0; v < rows; ++v) offsets[v + 1] += offsets[v];
    std::vector<std::int64_t> next(offsets.begin(), offsets.end() - 1);
    std::vector<std::int64_t> order(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) order[next[id[i]]++] = i;
    const std::int64_t per_task = std::max<std::int64_t>(1, (std::int64_t(1) << 14) / std::max<std::int64_t>(dim, 1));
    std::optional<py::gil_scoped_release> nogil;
    if ((n + rows) * dim >= 4096) nogil.emplace();
    for_each_task((rows + per_task - 1) / per_task, (n + rows) * dim, [&](std::int64_t t) {
        const std::int64_t begin = t * per_task, end = std::min(rows, begin + per_task);
        if (args.dtype() == Dtype::f32) {
            sum_rows(order.data(), offsets.data(), static_cast<const float*>(args.data("grad")),
                     static_cast<float*>(args.mutable_data("out")), begin, end, dim);
        } else {
            sum_rows(order.data(), offsets.data(), static_cast<const double*>(args.data("grad")),
                     static_cast<double*>(args.mutable_data("out")), begin, end, dim);
        }
        return false;
    });
}

}  // namespace

void bind_embedding(py::module_& m) {
    m.def("embedding_backward", &embedding_backward, py::arg("ids"), py::arg("grad"), py::arg("out"),
          R"doc(out = 0, then out[ids[i]] += grad[i] for each i in order: an embedding table's gradient
(4 B per gradient element read and per table element written, fp32, and 8 per id).)doc");
}

}  // namespace minitorch_accum

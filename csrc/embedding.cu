// Embedding backward: out[v] = the sum of the gradient rows of every id v, in the order
// the ids come (np.add.at's order), with no atomics. The host sorts the ids stably
// (order) and counts them (offsets: the ids of row v are order[offsets[v] : offsets[v+1]]);
// one thread per table element then adds its column of those rows in order.
#include "accum_math.cuh"

template <class T>
__device__ __forceinline__ void mta_embedding_backward_elements(const mta_i64* order, const mta_i64* offsets,
                                                                const T* grad, T* out, mta_u64 rows, mta_u64 dim) {
    const mta_u64 stride = (mta_u64)gridDim.x * blockDim.x;
    for (mta_u64 k = (mta_u64)blockIdx.x * blockDim.x + threadIdx.x; k < rows * dim; k += stride) {
        const mta_u64 v = k / dim;
        const mta_u64 j = k % dim;
        T acc = T(0);
        for (mta_i64 e = offsets[v]; e < offsets[v + 1]; ++e) acc = mta_add(acc, grad[(mta_u64)order[e] * dim + j]);
        out[k] = acc;
    }
}

// embedding_backward: out[v, j] = sum of grad[i, j] over ids i == v, in order (4 B per grad and per out element)
extern "C" __global__ void mta_embedding_backward_f32(const mta_i64* order, const mta_i64* offsets, const float* grad,
                                                      float* out, mta_u64 rows, mta_u64 dim) {
    mta_embedding_backward_elements<float>(order, offsets, grad, out, rows, dim);
}

extern "C" __global__ void mta_embedding_backward_f64(const mta_i64* order, const mta_i64* offsets,
                                                      const double* grad, double* out, mta_u64 rows, mta_u64 dim) {
    mta_embedding_backward_elements<double>(order, offsets, grad, out, rows, dim);
}

#define MTA_EMBEDDING_KERNELS(X)                 \
    X(mta_embedding_backward_f32, 1024, false)   \
    X(mta_embedding_backward_f64, 1024, false)

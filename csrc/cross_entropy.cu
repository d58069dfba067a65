// Softmax cross entropy with ignore_index over (rows, classes) logits, forward and
// backward, in the logits' dtype T. The forward is a row kernel (row_kernels.cuh: 32
// lanes per row): the row's max, its sum of e^(x - max) in the lane order of
// fused_math.cuh, log-sum-exp (kept for the backward in a float64 array) and the loss.
// The backward is elementwise. Byte counts are per element of the logits, fp32.
#include "fused_math.cuh"
#include "row_kernels.cuh"

template <class T>
__device__ __forceinline__ void mta_cross_entropy_forward_rows(const T* x, const mta_i64* targets, mta_i64 ignore_index,
                                                               T* losses, double* lse_out, mta_u64 rows,
                                                               mta_u64 classes) {
    const unsigned lane = threadIdx.x;
    for (mta_u64 base = mta_row_round_first(); base < rows; base += mta_row_round_stride()) {
        const mta_u64 row = base + threadIdx.y;
        const bool active = row < rows;
        const T* xr = x + (active ? row : 0) * classes;
        T m = mta_minus_infinity<T>();
        if (active) {
            for (mta_u64 i = lane; i < classes; i += MTA_ROW_LANES) m = mta_running_max(m, xr[i]);
        }
        const T shift = mta_softmax_shift(mta_row_lanes_max(m));
        T s = T(0);
        if (active) {
            for (mta_u64 i = lane; i < classes; i += MTA_ROW_LANES) s = mta_add(s, mta_softmax_exp(mta_sub(xr[i], shift)));
        }
        const T lse = mta_add(shift, mta_log_sum(mta_row_lanes_sum(s)));
        if (active && lane == 0) {
            lse_out[row] = mta_widen<double>(lse);
            const mta_i64 t = targets[row];
            losses[row] = t != ignore_index ? mta_sub(lse, xr[t]) : T(0);
        }
    }
}

template <class T>
__device__ __forceinline__ void mta_cross_entropy_backward_elements(const T* x, const mta_i64* targets,
                                                                    mta_i64 ignore_index, const double* lse,
                                                                    const T* grad, T* out, mta_u64 rows,
                                                                    mta_u64 classes) {
    const mta_u64 stride = (mta_u64)gridDim.x * blockDim.x;
    for (mta_u64 k = (mta_u64)blockIdx.x * blockDim.x + threadIdx.x; k < rows * classes; k += stride) {
        const mta_u64 row = k / classes;
        const mta_i64 t = targets[row];
        const bool valid = t != ignore_index;
        const T w = valid ? grad[row] : T(0);
        out[k] = mta_cross_entropy_grad_element<T>(x[k], MtaNarrow<T>::from(lse[row]), w,
                                                   valid && (mta_i64)(k % classes) == t);
    }
}

// cross_entropy_forward: losses = lse - x[target] (0 if ignored), lse = logsumexp per row (4 B/elem: x read)
extern "C" __global__ void __launch_bounds__(256)
    mta_cross_entropy_forward_f32(const float* x, const mta_i64* targets, mta_i64 ignore_index, float* losses,
                                  double* lse, mta_u64 rows, mta_u64 classes) {
    mta_cross_entropy_forward_rows<float>(x, targets, ignore_index, losses, lse, rows, classes);
}

extern "C" __global__ void __launch_bounds__(256)
    mta_cross_entropy_forward_f64(const double* x, const mta_i64* targets, mta_i64 ignore_index, double* losses,
                                  double* lse, mta_u64 rows, mta_u64 classes) {
    mta_cross_entropy_forward_rows<double>(x, targets, ignore_index, losses, lse, rows, classes);
}

// cross_entropy_backward: out = grad[row] (e^(x - lse) - [class == target]), 0 if ignored (8 B/elem: x read, out written)
extern "C" __global__ void mta_cross_entropy_backward_f32(const float* x, const mta_i64* targets,
                                                          mta_i64 ignore_index, const double* lse, const float* grad,
                                                          float* out, mta_u64 rows, mta_u64 classes) {
    mta_cross_entropy_backward_elements<float>(x, targets, ignore_index, lse, grad, out, rows, classes);
}

extern "C" __global__ void mta_cross_entropy_backward_f64(const double* x, const mta_i64* targets,
                                                          mta_i64 ignore_index, const double* lse, const double* grad,
                                                          double* out, mta_u64 rows, mta_u64 classes) {
    mta_cross_entropy_backward_elements<double>(x, targets, ignore_index, lse, grad, out, rows, classes);
}

#define MTA_CROSS_ENTROPY_KERNELS(X)                   \
    X(mta_cross_entropy_forward_f32, 256, true)        \
    X(mta_cross_entropy_forward_f64, 256, true)        \
    X(mta_cross_entropy_backward_f32, 1024, false)     \
    X(mta_cross_entropy_backward_f64, 1024, false)

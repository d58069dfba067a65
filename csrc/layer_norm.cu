// LayerNorm over the last axis of a (rows, cols) array, forward and backward. Row
// kernels run blocks of 32 x 8 threads (row_kernels.cuh): 32 lanes per row, 8 rows per
// block, rows grid-strided. Everything is computed in the stored dtype T, sums in the lane
// order of fused_math.cuh, so the results are the native module's and the NumPy
// reference's bits; mean and rstd are kept as float64 arrays. The weight and bias
// gradients are partial column sums (in T) per 64 rows (one thread per chunk and column),
// then the partials added in chunk order. Byte counts are per element for fp32.
#include "fused_math.cuh"
#include "row_kernels.cuh"

template <class T>
__device__ __forceinline__ void mta_layer_norm_forward_rows(const T* x, const T* w, const T* b, T* y, double* mean,
                                                            double* rstd, mta_u64 rows, mta_u64 cols, double eps) {
    const unsigned lane = threadIdx.x;
    const T count = (T)cols;
    const T eps_t = MtaNarrow<T>::from(eps);
    for (mta_u64 base = mta_row_round_first(); base < rows; base += mta_row_round_stride()) {
        const mta_u64 row = base + threadIdx.y;
        const bool active = row < rows;
        const T* xr = x + (active ? row : 0) * cols;
        T s = T(0);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) s = mta_add(s, xr[i]);
        }
        const T mu = mta_div(mta_row_lanes_sum(s), count);
        T q = T(0);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                const T c = mta_sub(xr[i], mu);
                q = mta_add(q, mta_mul(c, c));
            }
        }
        const T rs = mta_div(T(1), mta_sqrt(mta_add(mta_div(mta_row_lanes_sum(q), count), eps_t)));
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                y[row * cols + i] = mta_layer_norm_element<T>(xr[i], mu, rs, w ? w[i] : T(1), b ? b[i] : T(-0.0));
            }
            if (lane == 0) {
                mean[row] = mta_widen<double>(mu);
                rstd[row] = mta_widen<double>(rs);
            }
        }
    }
}

template <class T>
__device__ __forceinline__ void mta_layer_norm_input_grad_rows(const T* x, const T* w, const double* mean,
                                                               const double* rstd, const T* g, T* dx, mta_u64 rows,
                                                               mta_u64 cols) {
    const unsigned lane = threadIdx.x;
    const T count = (T)cols;
    for (mta_u64 base = mta_row_round_first(); base < rows; base += mta_row_round_stride()) {
        const mta_u64 row = base + threadIdx.y;
        const bool active = row < rows;
        const mta_u64 first = (active ? row : 0) * cols;
        const T mu = active ? MtaNarrow<T>::from(mean[row]) : T(0);
        const T rs = active ? MtaNarrow<T>::from(rstd[row]) : T(0);
        T a = T(0);
        T c = T(0);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                const T gw = mta_mul(g[first + i], w ? w[i] : T(1));
                const T x_hat = mta_mul(mta_sub(x[first + i], mu), rs);
                a = mta_add(a, gw);
                c = mta_add(c, mta_mul(gw, x_hat));
            }
        }
        const T mean_gw = mta_div(mta_row_lanes_sum(a), count);
        const T mean_gw_x_hat = mta_div(mta_row_lanes_sum(c), count);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                const T gw = mta_mul(g[first + i], w ? w[i] : T(1));
                const T x_hat = mta_mul(mta_sub(x[first + i], mu), rs);
                dx[first + i] = mta_layer_norm_grad_element<T>(gw, x_hat, rs, mean_gw, mean_gw_x_hat);
            }
        }
    }
}

// One thread per (chunk of 64 rows, column): the chunk's sums of g * x_hat and of g, in row order.
template <class T>
__device__ __forceinline__ void mta_layer_norm_column_partials(const T* x, const double* mean, const double* rstd,
                                                               const T* g, T* partial_w, T* partial_b,
                                                               mta_u64 rows, mta_u64 cols) {
    const mta_u64 chunks = (rows + MTA_COLUMN_CHUNK - 1) / MTA_COLUMN_CHUNK;
    const mta_u64 stride = (mta_u64)gridDim.x * blockDim.x;
    for (mta_u64 k = (mta_u64)blockIdx.x * blockDim.x + threadIdx.x; k < chunks * cols; k += stride) {
        const mta_u64 chunk = k / cols;
        const mta_u64 j = k % cols;
        const mta_u64 end = (chunk + 1) * MTA_COLUMN_CHUNK < rows ? (chunk + 1) * MTA_COLUMN_CHUNK : rows;
        T sw = T(0);
        T sb = T(0);
        for (mta_u64 r = chunk * MTA_COLUMN_CHUNK; r < end; ++r) {
            const T gv = g[r * cols + j];
            const T x_hat = mta_mul(mta_sub(x[r * cols + j], MtaNarrow<T>::from(mean[r])), MtaNarrow<T>::from(rstd[r]));
            sw = mta_add(sw, mta_mul(gv, x_hat));
            sb = mta_add(sb, gv);
        }
        if (partial_w) partial_w[k] = sw;
        if (partial_b) partial_b[k] = sb;
    }
}

template <class T>
__device__ __forceinline__ void mta_layer_norm_column_finish(const T* partials, T* out, mta_u64 chunks, mta_u64 cols) {
    const mta_u64 stride = (mta_u64)gridDim.x * blockDim.x;
    for (mta_u64 j = (mta_u64)blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += stride) {
        T total = T(0);
        for (mta_u64 c = 0; c < chunks; ++c) total = mta_add(total, partials[c * cols + j]);
        out[j] = total;
    }
}

// layer_norm_forward: y = (x - mean) rstd w + b per row, mean and rstd (fp64) kept (8 B/elem: x read, y written)
extern "C" __global__ void __launch_bounds__(256)
    mta_layer_norm_forward_f32(const float* x, const float* w, const float* b, float* y, double* mean, double* rstd,
                               mta_u64 rows, mta_u64 cols, double eps) {
    mta_layer_norm_forward_rows<float>(x, w, b, y, mean, rstd, rows, cols, eps);
}

extern "C" __global__ void __launch_bounds__(256)
    mta_layer_norm_forward_f64(const double* x, const double* w, const double* b, double* y, double* mean,
                               double* rstd, mta_u64 rows, mta_u64 cols, double eps) {
    mta_layer_norm_forward_rows<double>(x, w, b, y, mean, rstd, rows, cols, eps);
}

// layer_norm_input_grad: dx = rstd (g w - mean(g w) - x_hat mean(g w x_hat)) per row (12 B/elem: x, g read, dx written)
extern "C" __global__ void __launch_bounds__(256)
    mta_layer_norm_input_grad_f32(const float* x, const float* w, const double* mean, const double* rstd,
                                  const float* g, float* dx, mta_u64 rows, mta_u64 cols) {
    mta_layer_norm_input_grad_rows<float>(x, w, mean, rstd, g, dx, rows, cols);
}

extern "C" __global__ void __launch_bounds__(256)
    mta_layer_norm_input_grad_f64(const double* x, const double* w, const double* mean, const double* rstd,
                                  const double* g, double* dx, mta_u64 rows, mta_u64 cols) {
    mta_layer_norm_input_grad_rows<double>(x, w, mean, rstd, g, dx, rows, cols);
}

// layer_norm_column_partials: per 64 rows, sum of g x_hat and of g per column (8 B/elem: x, g read)
extern "C" __global__ void mta_layer_norm_column_partials_f32(const float* x, const double* mean, const double* rstd,
                                                              const float* g, float* partial_w, float* partial_b,
                                                              mta_u64 rows, mta_u64 cols) {
    mta_layer_norm_column_partials<float>(x, mean, rstd, g, partial_w, partial_b, rows, cols);
}

extern "C" __global__ void mta_layer_norm_column_partials_f64(const double* x, const double* mean,
                                                              const double* rstd, const double* g, double* partial_w,
                                                              double* partial_b, mta_u64 rows, mta_u64 cols) {
    mta_layer_norm_column_partials<double>(x, mean, rstd, g, partial_w, partial_b, rows, cols);
}

// layer_norm_column_finish: out[j] = the partials of column j added in chunk order (4 B per partial read)
extern "C" __global__ void mta_layer_norm_column_finish_f32(const float* partials, float* out, mta_u64 chunks,
                                                            mta_u64 cols) {
    mta_layer_norm_column_finish<float>(partials, out, chunks, cols);
}

extern "C" __global__ void mta_layer_norm_column_finish_f64(const double* partials, double* out, mta_u64 chunks,
                                                            mta_u64 cols) {
    mta_layer_norm_column_finish<double>(partials, out, chunks, cols);
}

#define MTA_LAYER_NORM_KERNELS(X)                        \
    X(mta_layer_norm_forward_f32, 256, true)             \
    X(mta_layer_norm_forward_f64, 256, true)             \
    X(mta_layer_norm_input_grad_f32, 256, true)          \
    X(mta_layer_norm_input_grad_f64, 256, true)          \
    X(mta_layer_norm_column_partials_f32, 1024, false)   \
    X(mta_layer_norm_column_partials_f64, 1024, false)   \
    X(mta_layer_norm_column_finish_f32, 1024, false)     \
    X(mta_layer_norm_column_finish_f64, 1024, false)

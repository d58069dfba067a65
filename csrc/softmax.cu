// Softmax over the rows of a (rows, cols) array, forward and backward, in the stored dtype
// T: row kernels of 32 x 8 threads (row_kernels.cuh), 32 lanes per row, 8 rows per block,
// rows grid-strided; sums in the lane order of fused_math.cuh, so the results are the
// native module's and the NumPy reference's bits. The forward's scores are x scale + bias,
// bias row r % bias_rows for row r (a causal mask: 0 and -inf, one row per query). Byte
// counts are per element for fp32.
#include "fused_math.cuh"
#include "row_kernels.cuh"

template <class T>
__device__ __forceinline__ void mta_softmax_forward_rows(const T* x, const T* bias, T* y, mta_u64 rows, mta_u64 cols,
                                                         mta_u64 bias_rows, double scale) {
    const unsigned lane = threadIdx.x;
    const T s = MtaNarrow<T>::from(scale);
    for (mta_u64 base = mta_row_round_first(); base < rows; base += mta_row_round_stride()) {
        const mta_u64 row = base + threadIdx.y;
        const bool active = row < rows;
        const T* xr = x + (active ? row : 0) * cols;
        const T* br = bias ? bias + (active ? row % bias_rows : 0) * cols : nullptr;
        T m = mta_minus_infinity<T>();
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                m = mta_running_max(m, mta_softmax_score(xr[i], s, br ? br[i] : T(-0.0)));
            }
        }
        const T shift = mta_softmax_shift(mta_row_lanes_max(m));
        T sum = T(0);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                const T e = mta_softmax_exp(mta_sub(mta_softmax_score(xr[i], s, br ? br[i] : T(-0.0)), shift));
                y[row * cols + i] = e;
                sum = mta_add(sum, e);
            }
        }
        const T inverse = mta_div(T(1), mta_row_lanes_sum(sum));
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) y[row * cols + i] = mta_mul(y[row * cols + i], inverse);
        }
    }
}

template <class T>
__device__ __forceinline__ void mta_softmax_backward_rows(const T* p, const T* g, T* out, mta_u64 rows, mta_u64 cols,
                                                          double scale) {
    const unsigned lane = threadIdx.x;
    const T s = MtaNarrow<T>::from(scale);
    for (mta_u64 base = mta_row_round_first(); base < rows; base += mta_row_round_stride()) {
        const mta_u64 row = base + threadIdx.y;
        const bool active = row < rows;
        const mta_u64 first = (active ? row : 0) * cols;
        T dot = T(0);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) dot = mta_add(dot, mta_mul(g[first + i], p[first + i]));
        }
        dot = mta_row_lanes_sum(dot);
        if (active) {
            for (mta_u64 i = lane; i < cols; i += MTA_ROW_LANES) {
                out[first + i] = mta_softmax_grad_element(p[first + i], g[first + i], dot, s);
            }
        }
    }
}

// softmax_forward: y = softmax(x scale + bias) per row (8 B/elem: x read, y written; the bias row is cached)
extern "C" __global__ void __launch_bounds__(256)
    mta_softmax_forward_f32(const float* x, const float* bias, float* y, mta_u64 rows, mta_u64 cols, mta_u64 bias_rows,
                            double scale) {
    mta_softmax_forward_rows<float>(x, bias, y, rows, cols, bias_rows, scale);
}

extern "C" __global__ void __launch_bounds__(256)
    mta_softmax_forward_f64(const double* x, const double* bias, double* y, mta_u64 rows, mta_u64 cols,
                            mta_u64 bias_rows, double scale) {
    mta_softmax_forward_rows<double>(x, bias, y, rows, cols, bias_rows, scale);
}

// softmax_backward: dx = p (g - sum(g p)) scale per row (12 B/elem: p, g read, dx written)
extern "C" __global__ void __launch_bounds__(256)
    mta_softmax_backward_f32(const float* p, const float* g, float* out, mta_u64 rows, mta_u64 cols, double scale) {
    mta_softmax_backward_rows<float>(p, g, out, rows, cols, scale);
}

extern "C" __global__ void __launch_bounds__(256)
    mta_softmax_backward_f64(const double* p, const double* g, double* out, mta_u64 rows, mta_u64 cols, double scale) {
    mta_softmax_backward_rows<double>(p, g, out, rows, cols, scale);
}

#define MTA_SOFTMAX_KERNELS(X)                \
    X(mta_softmax_forward_f32, 256, true)     \
    X(mta_softmax_forward_f64, 256, true)     \
    X(mta_softmax_backward_f32, 256, true)    \
    X(mta_softmax_backward_f64, 256, true)

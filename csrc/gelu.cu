// GELU, PyTorch's erf and tanh forms, forward and backward, over one array
// (grid-stride, 16-byte packs). The element math (float64, our erf and exp,
// rounded once) is in fused_math.cuh. Byte counts are per element for fp32.
#include "fused_math.cuh"
#include "kernel_loops.cuh"

template <class T, bool TANH>
struct MtaGeluOp {
    const T* x;
    const T* g;  // null: the forward
    T* y;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        const MtaPack<W, T> xx = mta_load<W>(x + i);
        MtaPack<W, T> gg{};
        if (g) gg = mta_load<W>(g + i);
        MtaPack<W, T> out;
        MTA_UNROLL
        for (int k = 0; k < W; ++k) {
            out.v[k] = g ? mta_gelu_backward_element<T, TANH>(xx.v[k], gg.v[k])
                         : mta_gelu_forward_element<T, TANH>(xx.v[k]);
        }
        mta_store<W>(y + i, out);
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(x) && mta_pack_aligned<W>(g) && mta_pack_aligned<W>(y);
    }
};

template <class T>
__device__ __forceinline__ void mta_gelu(const T* x, const T* g, T* y, mta_u64 n, int tanh) {
    if (tanh) {
        MtaGeluOp<T, true> op{x, g, y};
        mta_grid_stride_apply<16 / sizeof(T)>(op, n);
    } else {
        MtaGeluOp<T, false> op{x, g, y};
        mta_grid_stride_apply<16 / sizeof(T)>(op, n);
    }
}

// gelu_forward: y = gelu(x), erf form or (tanh != 0) tanh form (8 B/elem: x read, y written)
extern "C" __global__ void mta_gelu_forward_f32(const float* x, float* y, mta_u64 n, int tanh) {
    mta_gelu<float>(x, nullptr, y, n, tanh);
}

extern "C" __global__ void mta_gelu_forward_f64(const double* x, double* y, mta_u64 n, int tanh) {
    mta_gelu<double>(x, nullptr, y, n, tanh);
}

// gelu_backward: dx = dy * gelu'(x) (12 B/elem: x and dy read, dx written)
extern "C" __global__ void mta_gelu_backward_f32(const float* x, const float* dy, float* dx, mta_u64 n, int tanh) {
    mta_gelu<float>(x, dy, dx, n, tanh);
}

extern "C" __global__ void mta_gelu_backward_f64(const double* x, const double* dy, double* dx, mta_u64 n,
                                                 int tanh) {
    mta_gelu<double>(x, dy, dx, n, tanh);
}

#define MTA_GELU_KERNELS(X)                 \
    X(mta_gelu_forward_f32, 1024, false)    \
    X(mta_gelu_forward_f64, 1024, false)    \
    X(mta_gelu_backward_f32, 1024, false)   \
    X(mta_gelu_backward_f64, 1024, false)

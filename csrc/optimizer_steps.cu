// Fused optimizer steps that read the accumulated gradient directly and fold
// the window's normalization (1/k or 1/N_items) and any loss-scale unscale
// into grad_scale, so normalizing costs no extra pass over the gradients.
//
// The element math (PyTorch semantics) is in accum_math.cuh; the host rounds
// every scalar to the parameter dtype once (kernels/optimizer_scalars.py).
// Byte counts are per element for fp32.
#include "accum_math.cuh"
#include "kernel_loops.cuh"
#include "multi_tensor.cuh"

template <class T>
struct MtaSgdOp {
    T* p;
    const T* g;
    T* buf;  // null when momentum == 0
    MtaSgdScalars<T> h;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        MtaPack<W, T> pp = mta_load<W>(p + i);
        const MtaPack<W, T> gg = mta_load<W>(g + i);
        MtaPack<W, T> bb{};  // zero when not loaded: the update reads it, then discards the result
        const bool uses_buf = mta_nonzero(h.momentum);
        if (uses_buf && !h.first_step) bb = mta_load<W>(buf + i);
        MTA_UNROLL
        for (int k = 0; k < W; ++k) mta_sgd_momentum_update(pp.v[k], gg.v[k], bb.v[k], h);
        mta_store<W>(p + i, pp);
        if (uses_buf) mta_store<W>(buf + i, bb);
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(p) && mta_pack_aligned<W>(g) && mta_pack_aligned<W>(buf);
    }
};

template <class T>
struct MtaAdamOp {
    T* p;
    const T* g;
    T* m;
    T* v;
    MtaAdamScalars<T> h;

    template <int W>
    __device__ __forceinline__ void apply(mta_u64 i) {
        MtaPack<W, T> pp = mta_load<W>(p + i);
        const MtaPack<W, T> gg = mta_load<W>(g + i);
        MtaPack<W, T> mm = mta_load<W>(m + i);
        MtaPack<W, T> vv = mta_load<W>(v + i);
        MTA_UNROLL
        for (int k = 0; k < W; ++k) mta_adam_update(pp.v[k], gg.v[k], mm.v[k], vv.v[k], h);
        mta_store<W>(p + i, pp);
        mta_store<W>(m + i, mm);
        mta_store<W>(v + i, vv);
    }

    template <int W>
    __device__ __forceinline__ bool vectorizable() const {
        return mta_pack_aligned<W>(p) && mta_pack_aligned<W>(g) && mta_pack_aligned<W>(m) &&
               mta_pack_aligned<W>(v);
    }
};

template <class T>
__device__ __forceinline__ void mta_sgd_block(const MtaTensorTable<3>& table, const MtaSgdScalars<T>& h) {
    const MtaChunk c = mta_block_chunk(table);
    MtaSgdOp<T> op{mta_table_array<T>(table, 0, c), mta_table_array<const T>(table, 1, c),
                   mta_table_array<T>(table, 2, c), h};
    mta_block_apply<16 / sizeof(T)>(op, c.length);
}

template <class T>
__device__ __forceinline__ void mta_adam_block(const MtaTensorTable<4>& table, const MtaAdamScalars<T>& h) {
    const MtaChunk c = mta_block_chunk(table);
    MtaAdamOp<T> op{mta_table_array<T>(table, 0, c), mta_table_array<const T>(table, 1, c),
                    mta_table_array<T>(table, 2, c), mta_table_array<T>(table, 3, c), h};
    mta_block_apply<16 / sizeof(T)>(op, c.length);
}

// sgd_momentum_step: g' = s*g (+ wd*p); buf = mu*buf + (1-d)*g'; p -= lr*(nesterov ? g' + mu*buf : buf)
// (20 B/elem: p r/w, g r, buf r/w; 16 on the first step, which writes buf without reading it; 12 without momentum)
extern "C" __global__ void mta_sgd_momentum_step_f32(float* p, const float* g, float* buf, mta_u64 n,
                                                     MtaSgdScalars<float> h) {
    MtaSgdOp<float> op{p, g, buf, h};
    mta_grid_stride_apply<4>(op, n);
}

extern "C" __global__ void mta_sgd_momentum_step_f64(double* p, const double* g, double* buf, mta_u64 n,
                                                     MtaSgdScalars<double> h) {
    MtaSgdOp<double> op{p, g, buf, h};
    mta_grid_stride_apply<2>(op, n);
}

// A multi-tensor step kernel: BLOCK<T> over the table's chunks of DEPTH rows (p, g, and the state).
#define MTA_MULTI_STEP_KERNEL(name, T, DEPTH, SCALARS, BLOCK)                                  \
    extern "C" __global__ void __launch_bounds__(MTA_MT_BLOCK)                               \
        name(const __grid_constant__ MtaTensorTable<DEPTH> table, SCALARS<T> h) {            \
        BLOCK<T>(table, h);                                                                  \
    }

// multi_sgd_momentum_step: the same over a list of (p, g, buf), one launch per table (20 B/elem)
MTA_MULTI_STEP_KERNEL(mta_multi_sgd_momentum_step_f32, float, 3, MtaSgdScalars, mta_sgd_block)
MTA_MULTI_STEP_KERNEL(mta_multi_sgd_momentum_step_f64, double, 3, MtaSgdScalars, mta_sgd_block)

// adamw_step: p *= 1-lr*wd; m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'^2; p -= lr/bc1 * m/(sqrt(v)/sqrt(bc2) + eps)
// (28 B/elem: p, m, v read + write, g read)
extern "C" __global__ void mta_adamw_step_f32(float* p, const float* g, float* m, float* v, mta_u64 n,
                                              MtaAdamScalars<float> h) {
    MtaAdamOp<float> op{p, g, m, v, h};
    mta_grid_stride_apply<4>(op, n);
}

extern "C" __global__ void mta_adamw_step_f64(double* p, const double* g, double* m, double* v, mta_u64 n,
                                              MtaAdamScalars<double> h) {
    MtaAdamOp<double> op{p, g, m, v, h};
    mta_grid_stride_apply<2>(op, n);
}

// multi_adamw_step: the same over a list of (p, g, m, v), one launch per table (28 B/elem)
MTA_MULTI_STEP_KERNEL(mta_multi_adamw_step_f32, float, 4, MtaAdamScalars, mta_adam_block)
MTA_MULTI_STEP_KERNEL(mta_multi_adamw_step_f64, double, 4, MtaAdamScalars, mta_adam_block)

#define MTA_OPTIMIZER_KERNELS(X)                                \
    X(mta_sgd_momentum_step_f32, 1024, false)                   \
    X(mta_sgd_momentum_step_f64, 1024, false)                   \
    X(mta_multi_sgd_momentum_step_f32, MTA_MT_BLOCK, false)     \
    X(mta_multi_sgd_momentum_step_f64, MTA_MT_BLOCK, false)     \
    X(mta_adamw_step_f32, 1024, false)                          \
    X(mta_adamw_step_f64, 1024, false)                          \
    X(mta_multi_adamw_step_f32, MTA_MT_BLOCK, false)            \
    X(mta_multi_adamw_step_f64, MTA_MT_BLOCK, false)

"""Fused gradient-accumulation kernels: the lowest layer of minitorch_accum.

One kernel body, two compilers: the element math lives in csrc/accum_math.cuh,
the CUDA kernels in csrc/*.cu (run on GPUs through cupy.RawModule), and the
native CPU module minitorch_accum._native compiles the same header (SIMD loops
for SSE2/AVX2/AVX-512, chosen at load, on its own thread pool: MTA_NUM_THREADS or
OMP_NUM_THREADS, read at the first parallel call, caps its threads) and also
runs the CUDA kernels themselves through a launch emulator.

Every function dispatches on the array type: CuPy arrays run the CUDA kernels,
NumPy arrays the CPU path of ``kernel_path()`` ("native" by default; set
``MTA_KERNELS=reference|native|emulated`` or use ``use_path``).
``minitorch_accum.kernels.reference`` holds the NumPy oracle of each kernel,
with the native module's signatures. ``catalog`` is the one table of kernels
(what each computes, its bytes per element: ``bytes_moved``), which the
references, the native module's stub and the checks of tests/kernels follow.
``fused`` holds the fused layer kernels (GELU, LayerNorm, softmax cross entropy,
embedding backward, softmax rows) that the ops call instead of chains of NumPy temporaries.
Launch planning and the two runners (emulator, CuPy) are in ``launch/``, the
NVRTC and nvcc tools and the command line in ``tools/``; docs/kernels.md tells
the whole story.

This package imports nothing from the rest of minitorch_accum.
"""

from __future__ import annotations

from minitorch_accum.kernels.accumulate import (
    add_scale,
    add_scale_compensated,
    add_scale_stochastic,
    cast_add_scale,
    cast_add_scale_stochastic,
    copy_scale,
    copy_scale_compensated,
    copy_scale_stochastic,
    multi_add_scale,
    multi_add_scale_compensated,
    multi_add_scale_stochastic,
    multi_cast_add_scale,
    multi_cast_add_scale_stochastic,
    multi_copy_scale,
    multi_copy_scale_compensated,
    multi_copy_scale_stochastic,
    new_flag,
)
from minitorch_accum.kernels.catalog import CATALOG, KERNELS, KernelInfo, bytes_moved
from minitorch_accum.kernels.dispatch import (
    NativeExtensionMissingWarning,
    kernel_path,
    native_available,
    use_path,
)
from minitorch_accum.kernels.fused import (
    GELU_FORMS,
    cross_entropy_backward,
    cross_entropy_forward,
    embedding_backward,
    gelu_backward,
    gelu_forward,
    layer_norm_backward,
    layer_norm_forward,
    softmax_backward,
    softmax_forward,
)
from minitorch_accum.kernels.gemm import (
    float32_gemm_available,
    gemm,
    gemm_available,
    gemm_finish,
    gemm_start,
    register_blas_gemm,
    stacked_gemm,
)
from minitorch_accum.kernels.norms import l2_norm, multi_l2_norm
from minitorch_accum.kernels.optimizer_steps import (
    adamw_step,
    multi_adamw_step,
    multi_sgd_momentum_step,
    sgd_momentum_step,
)
from minitorch_accum.kernels.row_vector import add_row_vector, row_vector_available, sum_rows
from minitorch_accum.kernels.threads import native_threads, set_native_threads

__all__ = [
    "CATALOG",
    "GELU_FORMS",
    "KERNELS",
    "KernelInfo",
    "NativeExtensionMissingWarning",
    "adamw_step",
    "add_row_vector",
    "add_scale",
    "add_scale_compensated",
    "add_scale_stochastic",
    "bytes_moved",
    "cast_add_scale",
    "cast_add_scale_stochastic",
    "copy_scale",
    "copy_scale_compensated",
    "copy_scale_stochastic",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "embedding_backward",
    "float32_gemm_available",
    "gelu_backward",
    "gelu_forward",
    "gemm",
    "gemm_available",
    "gemm_finish",
    "gemm_start",
    "kernel_path",
    "l2_norm",
    "layer_norm_backward",
    "layer_norm_forward",
    "multi_adamw_step",
    "multi_add_scale",
    "multi_add_scale_compensated",
    "multi_add_scale_stochastic",
    "multi_cast_add_scale",
    "multi_cast_add_scale_stochastic",
    "multi_copy_scale",
    "multi_copy_scale_compensated",
    "multi_copy_scale_stochastic",
    "multi_l2_norm",
    "multi_sgd_momentum_step",
    "native_available",
    "native_threads",
    "new_flag",
    "register_blas_gemm",
    "row_vector_available",
    "set_native_threads",
    "sgd_momentum_step",
    "softmax_backward",
    "softmax_forward",
    "stacked_gemm",
    "sum_rows",
    "use_path",
]

"""What each kernel computes and the bytes per element it must move.

Bytes per element are for fp32 accumulators and gradients (the figure the
benchmarks divide by time to get bandwidth); the note gives the other cases.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CATALOG", "KERNELS", "KernelInfo", "source_of"]


@dataclass(frozen=True)
class KernelInfo:
    name: str
    computes: str
    bytes_fp32: int
    note: str
    source: str  # the .cu file holding its CUDA kernels


CATALOG: tuple[KernelInfo, ...] = (
    KernelInfo("add_scale", "acc += s * g", 12, "fp64: 24; fp32 g into fp64: 20", "accumulate.cu"),
    KernelInfo("copy_scale", "acc = s * g (first micro-batch of a window: no zeroing pass)", 8, "", "accumulate.cu"),
    KernelInfo(
        "cast_add_scale", "acc(fp32) += s * float(g) for fp16/bf16 g, in one pass", 10, "g is 2 bytes", "accumulate.cu"
    ),
    KernelInfo(
        "add_scale_compensated", "Neumaier: (acc, comp) += s * g; acc + comp is the sum", 20, "", "accumulate.cu"
    ),
    KernelInfo("copy_scale_compensated", "acc = s * g, comp = 0", 12, "", "accumulate.cu"),
    KernelInfo(
        "multi_add_scale",
        "add_scale over a list of (acc, g), mixed dtypes, one launch per table",
        12,
        "10 from fp16/bf16",
        "accumulate.cu",
    ),
    KernelInfo("multi_copy_scale", "copy_scale over a list, one launch per table", 8, "", "accumulate.cu"),
    KernelInfo("multi_cast_add_scale", "cast_add_scale over a list, one launch per table", 10, "", "accumulate.cu"),
    KernelInfo("multi_add_scale_compensated", "add_scale_compensated over a list", 20, "", "accumulate.cu"),
    KernelInfo("multi_copy_scale_compensated", "copy_scale_compensated over a list", 12, "", "accumulate.cu"),
    KernelInfo(
        "l2_norm", "sqrt(sum x^2): block partial sums, then a final reduce", 4, "2 from fp16/bf16", "l2_norm.cu"
    ),
    KernelInfo("multi_l2_norm", "global L2 norm of a list (clipping by global norm)", 4, "", "l2_norm.cu"),
    KernelInfo(
        "sgd_momentum_step",
        "p -= lr * (momentum buffer of grad_scale * g + wd * p), PyTorch SGD",
        20,
        "16 on the first step, 12 without momentum",
        "optimizer_steps.cu",
    ),
    KernelInfo(
        "multi_sgd_momentum_step", "sgd_momentum_step over a list, one launch per table", 20, "", "optimizer_steps.cu"
    ),
    KernelInfo(
        "adamw_step",
        "AdamW/Adam-L2 step on grad_scale * g, bias corrections from the host",
        28,
        "",
        "optimizer_steps.cu",
    ),
    KernelInfo("multi_adamw_step", "adamw_step over a list, one launch per table", 28, "", "optimizer_steps.cu"),
)

KERNELS: tuple[str, ...] = tuple(k.name for k in CATALOG)


def source_of(cuda_kernel: str) -> str:
    """The .cu file defining a CUDA kernel, from its extern "C" name (mta_...)."""
    if "l2_norm" in cuda_kernel:
        return "l2_norm.cu"
    if "sgd" in cuda_kernel or "adamw" in cuda_kernel:
        return "optimizer_steps.cu"
    return "accumulate.cu"

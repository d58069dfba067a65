"""What each kernel computes and the bytes per element it must move: the one table.

Bytes are counted from how often a kernel touches each element: ``acc_accesses``
reads plus writes of accumulator-dtype arrays (acc, comp, or the parameter and
its optimizer states; for the fused layer kernels, the arrays of the kernel's
dtype), ``grad_reads`` reads of the gradient. ``bytes_moved``
turns that into bytes for any dtypes; ``bytes_fp32`` is the figure for fp32
accumulators (the one the benchmarks divide by time to get bandwidth), with a
2-byte gradient for the cast kernels. The accumulation layer's window passes
(not kernels of this package) are counted the same way, in ``WINDOW_PASSES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CATALOG", "KERNELS", "WINDOW_PASSES", "KernelInfo", "bytes_moved", "source_of"]


@dataclass(frozen=True)
class KernelInfo:
    name: str
    computes: str
    acc_accesses: int  # reads + writes per element of accumulator-dtype arrays
    grad_reads: int  # reads per element of the gradient
    note: str = ""
    fp32_grad_itemsize: int = 4  # the gradient's bytes in the fp32 figure (2 for the cast kernels)

    @property
    def bytes_fp32(self) -> int:
        """Bytes per element with fp32 accumulators."""
        return 4 * self.acc_accesses + self.fp32_grad_itemsize * self.grad_reads


CATALOG: tuple[KernelInfo, ...] = (
    KernelInfo("add_scale", "acc += s * g", 2, 1, "fp64: 24; fp32 g into fp64: 20"),
    KernelInfo("copy_scale", "acc = s * g (first micro-batch of a window: no zeroing pass)", 1, 1),
    KernelInfo("cast_add_scale", "acc(fp32) += s * float(g) for fp16/bf16 g, in one pass", 2, 1, "g is 2 bytes", 2),
    KernelInfo("add_scale_compensated", "Neumaier: (acc, comp) += s * g; acc + comp is the sum", 4, 1),
    KernelInfo("copy_scale_compensated", "acc = s * g, comp = 0", 2, 1),
    KernelInfo("multi_add_scale", "add_scale over a list of (acc, g), mixed dtypes, one launch per table", 2, 1,
               "10 from fp16/bf16"),
    KernelInfo("multi_copy_scale", "copy_scale over a list, one launch per table", 1, 1),
    KernelInfo("multi_cast_add_scale", "cast_add_scale over a list, one launch per table", 2, 1, "", 2),
    KernelInfo("multi_add_scale_compensated", "add_scale_compensated over a list", 4, 1),
    KernelInfo("multi_copy_scale_compensated", "copy_scale_compensated over a list", 2, 1),
    KernelInfo(
        "l2_norm", "sqrt(sum x^2), fp64 sums: block partials, then a final reduce", 1, 0, "2 from fp16/bf16, 8 fp64"
    ),
    KernelInfo("multi_l2_norm", "global L2 norm of a list (clipping by global norm)", 1, 0),
    KernelInfo("sgd_momentum_step", "p -= lr * (momentum buffer of grad_scale * g + wd * p), PyTorch SGD", 4, 1,
               "16 on the first step, 12 without momentum"),
    KernelInfo("multi_sgd_momentum_step", "sgd_momentum_step over a list, one launch per table", 4, 1),
    KernelInfo("adamw_step", "AdamW/Adam-L2 step on grad_scale * g, bias corrections from the host", 6, 1),
    KernelInfo("multi_adamw_step", "adamw_step over a list, one launch per table", 6, 1),
    # the fused layer kernels: "acc" accesses are those of arrays of the kernel's dtype
    KernelInfo("gelu_forward", "y = gelu(x), erf or tanh form, in fp64 with our erf, rounded once", 2, 0),
    KernelInfo("gelu_backward", "dx = dy * gelu'(x)", 3, 0),
    KernelInfo("layer_norm_forward", "y = (x - mean) rstd w + b per row; mean, rstd (fp64) kept", 2, 0,
               "+16 B per row"),
    KernelInfo("layer_norm_backward", "dx, dw, db of layer_norm_forward (column sums per 64 rows)", 3, 0,
               "+16 B per row"),
    KernelInfo("cross_entropy_forward", "loss = logsumexp(x) - x[target] per row, 0 if ignored; lse kept", 1, 0,
               "+16 B per row"),
    KernelInfo("cross_entropy_backward", "dx = grad (softmax(x) - one_hot(target)), 0 on ignored rows", 2, 0,
               "+20 B per row"),
    KernelInfo("embedding_backward", "out[ids[i]] += grad[i] in order (a counting sort, no np.add.at)", 2, 0,
               "per grad element; +8 B per id"),
)

KERNELS: tuple[str, ...] = tuple(k.name for k in CATALOG)

# Passes of the accumulation layer that are not kernels here, counted the same way (traces name them).
# A GEMM-fused write is counted per element of the weight gradient it writes; its two factors (N x in
# and N x out for a micro-batch of N rows) are read on top, by the GEMM and by their norms.
_FACTORS = "+ its factors A, B read twice (the GEMM, their norms)"
WINDOW_PASSES: tuple[KernelInfo, ...] = (
    KernelInfo("gemm-beta0", "acc = s * (A @ B): the GEMM writes a weight gradient into the arena (first "
               "micro-batch)", 1, 0, _FACTORS),
    KernelInfo("gemm-beta1", "acc += s * (A @ B): the GEMM adds into the arena (beta = 1)", 2, 0, _FACTORS),
    KernelInfo("gemm-fallback", "A @ B computed apart, then added (no BLAS call can write the view)", 2, 1,
               _FACTORS),
    KernelInfo("cast_copy_scale", "acc(fp32) = s * float(g): copy_scale of a fp16/bf16 g", 1, 1, "", 2),
    KernelInfo("container-store", "Burn's container keeps the gradient array itself: nothing moved", 0, 0),
    KernelInfo("container-add", "Burn's container sums a gradient into its entry", 2, 1),
    KernelInfo("scale", "acc *= s over the window's buffer (normalization not folded into a step)", 2, 0),
    KernelInfo("fold_compensation", "acc += comp, the compensation folded into the sum", 3, 0),
    KernelInfo("finite_check", "reads acc once to look for inf/nan", 1, 0),
)

_BY_NAME: dict[str, KernelInfo] = {k.name: k for k in CATALOG + WINDOW_PASSES}
# the dtype suffixes of the CUDA kernel names: mta_add_scale_f32_bf16, mta_adamw_step_f64
_CUDA_NAME = re.compile(r"(?:mta_)?(\w+?)((?:_(?:f16|bf16|f32|f64)){0,2})")


def bytes_moved(name: str, elements: int, acc_itemsize: int, grad_itemsize: int) -> int:
    """Bytes a kernel or window pass must move (reads plus writes) over ``elements`` elements.

    ``name``: a kernel of CATALOG, a pass of WINDOW_PASSES, or a CUDA kernel name with its
    dtypes (mta_cast_add_scale_f32_bf16). For the L2 norm the array read counts as the
    accumulator; for optimizer steps the parameter does. KeyError for an unknown name.
    """
    info = _BY_NAME.get(name)
    if info is None:
        match = _CUDA_NAME.fullmatch(name)
        info = _BY_NAME.get(match.group(1)) if match else None
        if info is None:
            raise KeyError(f"bytes_moved: unknown kernel or pass {name!r}; known: {', '.join(_BY_NAME)}")
    return (info.acc_accesses * acc_itemsize + info.grad_reads * grad_itemsize) * elements


def source_of(cuda_kernel: str) -> str:
    """The .cu file defining a CUDA kernel, from its extern "C" name (mta_...)."""
    for family in ("gelu", "layer_norm", "cross_entropy", "embedding"):
        if cuda_kernel.startswith(f"mta_{family}_"):
            return f"{family}.cu"
    if "l2_norm" in cuda_kernel:
        return "l2_norm.cu"
    if "sgd" in cuda_kernel or "adamw" in cuda_kernel:
        return "optimizer_steps.cu"
    return "accumulate.cu"

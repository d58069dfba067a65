"""The one table of kernels: what each computes, the bytes per element it must move, and what
every other list of kernels is made from or checked against.

A row (``KernelInfo``) of ``CATALOG`` says, besides what the kernel computes:

- its ``family``, which says how its NumPy reference and its face are made: ``reference`` builds
  the reference of every row from it at import (the fused family's are the bodies in
  ``fused_reference``); the typed faces (accumulate.py, norms.py, optimizer_steps.py, fused.py)
  read their mode and whether they take lists from the row;
- its ``signature`` in the native module, which the reference shares: the stub
  minitorch_accum/_native.pyi is generated from it (``python -m minitorch_accum.kernels stub``);
- its CUDA ``source`` and the ``cuda`` stems of the extern "C" kernels it owns
  (mta_<stem>[_<dtype>[_<dtype>]]): the launch planner names them, ``source_of`` finds their file.

What C++ must hold written by hand (the native module's functions and their parameters, the
kernels of csrc/*.cu, the bytes per element their comments state) and the faces and
``__all__`` are checked against this table by tests/kernels/test_kernel_table.py, which names
what is missing. Adding a kernel is its body (element math, CUDA kernel, native binding,
reference math if it is a new mode) and one row here.

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

from minitorch_accum.kernels import modes

__all__ = [
    "ACCUMULATE",
    "ADAM",
    "CATALOG",
    "FAMILIES",
    "FUSED",
    "KERNELS",
    "L2_NORM",
    "SGD",
    "WINDOW_PASSES",
    "KernelInfo",
    "accumulate_kernel",
    "bytes_moved",
    "cuda_stem",
    "kernel_info",
    "source_of",
]

# The families: how a row's reference is built and which face serves it.
ACCUMULATE = "accumulate"  # acc (+)= s * g by mode; reference from the mode's math (reference.py)
L2_NORM = "l2_norm"  # fp64 sum of squares
SGD = "sgd"  # the SGD step on (param, grad, momentum_buf) and an SgdScalars
ADAM = "adam"  # the AdamW step on (param, grad, exp_avg, exp_avg_sq) and an AdamScalars
FUSED = "fused"  # a fused layer kernel: its reference is its own body in fused_reference
FAMILIES: tuple[str, ...] = (ACCUMULATE, L2_NORM, SGD, ADAM, FUSED)


@dataclass(frozen=True)
class KernelInfo:
    """One kernel (or, in WINDOW_PASSES, one pass of the accumulation layer): what it computes,
    how often it touches each element, and (kernels only) how the rest of the package knows it."""

    name: str
    computes: str
    acc_accesses: int  # reads + writes per element of accumulator-dtype arrays
    grad_reads: int  # reads per element of the gradient
    note: str = ""
    fp32_grad_itemsize: int = 4  # the gradient's bytes in the fp32 figure (2 for the cast kernels)
    family: str = ""  # one of FAMILIES; "" for a window pass
    # the parameters and result in the native module and the reference, as the stub writes them
    # (names of the stub: Array, Flag, Sequence, SgdScalars, AdamScalars); "" for the fused
    # family, whose reference body in fused_reference has it
    signature: str = ""
    source: str = ""  # the csrc/*.cu file of its CUDA kernels
    cuda: tuple[str, ...] = ()  # the stems of the extern "C" kernels it owns (another row's may serve it)
    mode: int | None = None  # the accumulation mode (modes.py) of the accumulate family
    cast_only: bool = False  # an accumulate kernel that takes only a float16 or bfloat16 g
    acc_itemsize: int = 4  # the accumulator's bytes in the stated figure: 2 for a kernel that writes only bfloat16

    @property
    def bytes_fp32(self) -> int:
        """Bytes per element of the stated figure: fp32 accumulators (a bfloat16 one for a kernel that
        writes only bfloat16, ``acc_itemsize`` 2) and a fp32 gradient (2 bytes for the cast kernels)."""
        return self.acc_itemsize * self.acc_accesses + self.fp32_grad_itemsize * self.grad_reads

    @property
    def figure_dtypes(self) -> str:
        """What the stated figure assumes: ``fp32``, or ``bf16 acc`` for a bfloat16-only kernel."""
        return "fp32" if self.acc_itemsize == 4 else "bf16 acc"

    @property
    def listed(self) -> bool:
        """Whether it takes lists of arrays (a multi_* kernel) rather than one array per role."""
        return self.name.startswith("multi_")


_ONE = "(acc: Array, g: Array, scale: float, flag: Flag = None) -> None"
_ONE_COMPENSATED = "(acc: Array, comp: Array, g: Array, scale: float, flag: Flag = None) -> None"
_LIST = "(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None) -> None"
_LIST_COMPENSATED = (
    "(accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None) -> None"
)
_ONE_STOCHASTIC = (
    "(acc: Array, g: Array, scale: float, seed: int, window: int, micro_batch: int, offset: int = 0,"
    " flag: Flag = None) -> None"
)
_LIST_STOCHASTIC = (
    "(accs: Sequence[Array], gs: Sequence[Array], scale: float, seed: int, window: int, micro_batch: int,"
    " offsets: Sequence[int] | None = None, flag: Flag = None) -> None"
)


def _accumulate(
    name: str, mode: int, computes: str, acc_accesses: int, note: str = "", *, cast_only: bool = False,
    owns_cuda: bool = True, signature: str | None = None,
) -> KernelInfo:
    """A row of the accumulate family: unless given, its signature follows from its mode and whether it
    takes lists (a kernel with arguments of its own gives it, and unpacks them in reference.py)."""
    compensated, listed = modes.is_compensated(mode), name.startswith("multi_")
    stochastic = modes.is_stochastic(mode)
    if signature is None and stochastic:
        signature = _LIST_STOCHASTIC if listed else _ONE_STOCHASTIC
    if signature is None:
        signature = {(False, False): _ONE, (True, False): _ONE_COMPENSATED, (False, True): _LIST,
                     (True, True): _LIST_COMPENSATED}[compensated, listed]
    return KernelInfo(name, computes, acc_accesses, 1, note, 2 if cast_only else 4, family=ACCUMULATE,
                      signature=signature, source="accumulate.cu", cuda=(name,) if owns_cuda else (), mode=mode,
                      cast_only=cast_only, acc_itemsize=2 if stochastic else 4)


def _fused(name: str, source: str, computes: str, acc_accesses: int, note: str = "",
           cuda: tuple[str, ...] | None = None) -> KernelInfo:
    return KernelInfo(name, computes, acc_accesses, 0, note, family=FUSED, source=source,
                      cuda=(name,) if cuda is None else cuda)


_SGD_ONE = "(param: Array, grad: Array, momentum_buf: Array | None, scalars: SgdScalars) -> None"
_SGD_LIST = (
    "(params: Sequence[Array], grads: Sequence[Array], momentum_bufs: Sequence[Array] | None, scalars: SgdScalars)"
    " -> None"
)
_ADAM_ONE = "(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, scalars: AdamScalars) -> None"
_ADAM_LIST = (
    "(params: Sequence[Array], grads: Sequence[Array], exp_avgs: Sequence[Array], exp_avg_sqs: Sequence[Array],"
    " scalars: AdamScalars) -> None"
)
_STEPS = "optimizer_steps.cu"
_L2 = "l2_norm.cu"

CATALOG: tuple[KernelInfo, ...] = (
    _accumulate("add_scale", modes.ADD, "acc += s * g", 2,
                "fp64: 24; fp32 g into fp64: 20; into bf16, rounded to nearest: 8"),
    _accumulate("copy_scale", modes.COPY, "acc = s * g (first micro-batch of a window: no zeroing pass)", 1,
                "into bf16: 6"),
    _accumulate("cast_add_scale", modes.ADD, "acc(fp32 or bf16) += s * float(g) for fp16/bf16 g, in one pass", 2,
                "g is 2 bytes; into bf16: 6", cast_only=True),
    _accumulate("add_scale_compensated", modes.ADD_COMPENSATED,
                "Neumaier: (acc, comp) += s * g; acc + comp is the sum", 4),
    _accumulate("copy_scale_compensated", modes.COPY_COMPENSATED, "acc = s * g, comp = 0", 2),
    _accumulate("multi_add_scale", modes.ADD,
                "add_scale over a list of (acc, g), mixed dtypes, one launch per table", 2, "10 from fp16/bf16"),
    _accumulate("multi_copy_scale", modes.COPY, "copy_scale over a list, one launch per table", 1),
    # runs mta_multi_add_scale, which widens each g by its kind
    _accumulate("multi_cast_add_scale", modes.ADD, "cast_add_scale over a list, one launch per table", 2,
                cast_only=True, owns_cuda=False),
    _accumulate("multi_add_scale_compensated", modes.ADD_COMPENSATED, "add_scale_compensated over a list", 4),
    _accumulate("multi_copy_scale_compensated", modes.COPY_COMPENSATED, "copy_scale_compensated over a list", 2),
    # stochastic rounding into a bfloat16 arena: summed in float32, rounded up with probability equal to
    # the discarded fraction, the random bits from a Philox4x32-10 stream keyed by (seed, window,
    # micro-batch, element); their figures are for a bf16 acc
    _accumulate("add_scale_stochastic", modes.ADD_STOCHASTIC, "acc(bf16) = SR(float(acc) + s * g)", 2,
                "fp32 g; 6 from fp16/bf16"),
    _accumulate("copy_scale_stochastic", modes.COPY_STOCHASTIC, "acc(bf16) = SR(s * g) (first micro-batch)", 1,
                "fp32 g; 4 from fp16/bf16"),
    _accumulate("cast_add_scale_stochastic", modes.ADD_STOCHASTIC,
                "acc(bf16) = SR(float(acc) + s * float(g)) for fp16/bf16 g, in one pass", 2, cast_only=True),
    _accumulate("multi_add_scale_stochastic", modes.ADD_STOCHASTIC,
                "add_scale_stochastic over a list, each tensor at its offset in the stream", 2, "6 from fp16/bf16"),
    _accumulate("multi_copy_scale_stochastic", modes.COPY_STOCHASTIC, "copy_scale_stochastic over a list", 1),
    # runs mta_multi_add_scale_stochastic, which widens each g by its kind
    _accumulate("multi_cast_add_scale_stochastic", modes.ADD_STOCHASTIC, "cast_add_scale_stochastic over a list",
                2, cast_only=True, owns_cuda=False),
    # both norms run multi_l2_norm's two passes (a single array is a list of one)
    KernelInfo("l2_norm", "sqrt(sum x^2), fp64 sums: block partials, then a final reduce", 1, 0,
               "2 from fp16/bf16, 8 fp64", family=L2_NORM, signature="(x: Array) -> float", source=_L2),
    KernelInfo("multi_l2_norm", "global L2 norm of a list (clipping by global norm)", 1, 0, family=L2_NORM,
               signature="(tensors: Sequence[Array]) -> float", source=_L2,
               cuda=("multi_l2_norm_partials", "l2_norm_finalize")),
    KernelInfo("sgd_momentum_step", "p -= lr * (momentum buffer of grad_scale * g + wd * p), PyTorch SGD", 4, 1,
               "16 on the first step, 12 without momentum", family=SGD, signature=_SGD_ONE, source=_STEPS,
               cuda=("sgd_momentum_step",)),
    KernelInfo("multi_sgd_momentum_step", "sgd_momentum_step over a list, one launch per table", 4, 1, family=SGD,
               signature=_SGD_LIST, source=_STEPS, cuda=("multi_sgd_momentum_step",)),
    KernelInfo("adamw_step", "AdamW/Adam-L2 step on grad_scale * g, bias corrections from the host", 6, 1,
               family=ADAM, signature=_ADAM_ONE, source=_STEPS, cuda=("adamw_step",)),
    KernelInfo("multi_adamw_step", "adamw_step over a list, one launch per table", 6, 1, family=ADAM,
               signature=_ADAM_LIST, source=_STEPS, cuda=("multi_adamw_step",)),
    # the fused layer kernels: "acc" accesses are those of arrays of the kernel's dtype
    _fused("gelu_forward", "gelu.cu", "y = gelu(x), erf or tanh form, in x's dtype with our erf / normal distribution",
           2),
    _fused("gelu_backward", "gelu.cu", "dx = dy * gelu'(x)", 3),
    _fused("layer_norm_forward", "layer_norm.cu", "y = (x - mean) rstd w + b per row; mean, rstd (fp64) kept", 2,
           "+16 B per row"),
    _fused("layer_norm_backward", "layer_norm.cu", "dx, dw, db of layer_norm_forward (column sums per 64 rows)", 3,
           "+16 B per row",
           cuda=("layer_norm_input_grad", "layer_norm_column_partials", "layer_norm_column_finish")),
    _fused("cross_entropy_forward", "cross_entropy.cu",
           "loss = logsumexp(x) - x[target] per row, 0 if ignored; lse kept", 1, "+16 B per row"),
    _fused("cross_entropy_backward", "cross_entropy.cu",
           "dx = grad (softmax(x) - one_hot(target)), 0 on ignored rows", 2, "+20 B per row"),
    _fused("embedding_backward", "embedding.cu", "out[ids[i]] += grad[i] in order (a counting sort, no np.add.at)",
           2, "per grad element; +8 B per id"),
    _fused("softmax_forward", "softmax.cu", "y = softmax(x scale + bias) per row, bias row r % bias rows (a mask)", 2),
    _fused("softmax_backward", "softmax.cu", "dx = p (g - sum(g p)) scale per row", 3),
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

_KERNELS_BY_NAME: dict[str, KernelInfo] = {k.name: k for k in CATALOG}
_BY_NAME: dict[str, KernelInfo] = {k.name: k for k in CATALOG + WINDOW_PASSES}
_OWNER: dict[str, KernelInfo] = {stem: k for k in CATALOG for stem in k.cuda}
# the dtype suffixes of the CUDA kernel names: mta_add_scale_f32_bf16, mta_adamw_step_f64
_CUDA_NAME = re.compile(r"(?:mta_)?(\w+?)((?:_(?:f16|bf16|f32|f64)){0,2})")


def kernel_info(name: str) -> KernelInfo:
    """The row of kernel ``name``; KeyError naming the known kernels otherwise."""
    info = _KERNELS_BY_NAME.get(name)
    if info is None:
        raise KeyError(f"{name!r} is not a kernel of the catalog; known: {', '.join(KERNELS)}")
    return info


def accumulate_kernel(mode: int, *, listed: bool, cast: bool = False) -> KernelInfo:
    """The accumulate row whose CUDA kernels run ``mode`` on one array (or, ``listed``, on a list):
    with ``cast`` (a float16 or bfloat16 g) a cast-only row of the mode if the table has one."""
    rows = [k for k in CATALOG if k.family == ACCUMULATE and k.mode == mode and k.listed == listed and k.cuda]
    for row in rows:
        if row.cast_only == cast:
            return row
    if rows and cast:
        return rows[0]
    raise KeyError(f"no accumulate kernel of the catalog runs mode {mode} (listed={listed}) with CUDA kernels")


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


def cuda_stem(cuda_kernel: str) -> str:
    """The stem of a CUDA kernel's extern "C" name: mta_cast_add_scale_f32_bf16 -> cast_add_scale."""
    match = _CUDA_NAME.fullmatch(cuda_kernel)
    return match.group(1) if match else cuda_kernel


def source_of(cuda_kernel: str) -> str:
    """The .cu file defining a CUDA kernel, from its extern "C" name (mta_...): its owner's row says.

    KeyError when no row of the catalog owns the kernel."""
    owner = _OWNER.get(cuda_stem(cuda_kernel))
    if owner is None:
        raise KeyError(f"source_of: no kernel of the catalog owns the CUDA kernel {cuda_kernel!r}")
    return owner.source

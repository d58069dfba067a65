"""Native CPU kernels of minitorch_accum (SIMD loops over a thread pool, GIL released) and the CPU
launch emulator of its CUDA kernels. Private: use minitorch_accum.kernels.

Arrays are NumPy arrays, C-contiguous, of matching sizes (shapes may differ);
accumulators are written in place. Errors name the kernel and each argument's
shape and dtype. The optimizer steps take the scalars object derived on the host
(minitorch_accum.kernels.optimizer_scalars), read by field name, and round each
field once to the dtype. minitorch_accum.kernels.reference has these signatures.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels.optimizer_scalars import AdamScalars, SgdScalars

Array = np.ndarray
Flag = np.ndarray | None

def add_scale(acc: Array, g: Array, scale: float, flag: Flag = None) -> None: ...
def copy_scale(acc: Array, g: Array, scale: float, flag: Flag = None) -> None: ...
def cast_add_scale(acc: Array, g: Array, scale: float, flag: Flag = None) -> None: ...
def add_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Flag = None) -> None: ...
def copy_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Flag = None) -> None: ...
def multi_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None) -> None: ...
def multi_copy_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None) -> None: ...
def multi_cast_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None) -> None: ...
def multi_add_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None
) -> None: ...
def multi_copy_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Flag = None
) -> None: ...
def l2_norm(x: Array) -> float: ...
def multi_l2_norm(tensors: Sequence[Array]) -> float: ...
def sgd_momentum_step(param: Array, grad: Array, momentum_buf: Array | None, scalars: SgdScalars) -> None: ...
def multi_sgd_momentum_step(
    params: Sequence[Array], grads: Sequence[Array], momentum_bufs: Sequence[Array] | None, scalars: SgdScalars
) -> None: ...
def adamw_step(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, scalars: AdamScalars) -> None: ...
def multi_adamw_step(
    params: Sequence[Array],
    grads: Sequence[Array],
    exp_avgs: Sequence[Array],
    exp_avg_sqs: Sequence[Array],
    scalars: AdamScalars,
) -> None: ...
def gelu_forward(x: Array, out: Array, tanh: bool) -> None: ...
def gelu_backward(x: Array, grad: Array, out: Array, tanh: bool) -> None: ...
def erf(x: Array, out: Array) -> None:
    """The erf of the GELU kernels (float64 inside, rounded once to x's dtype), for its accuracy test."""
def layer_norm_forward(
    x: Array, weight: Array | None, bias: Array | None, eps: float, out: Array, mean: Array, rstd: Array
) -> None: ...
def layer_norm_backward(
    x: Array,
    weight: Array | None,
    mean: Array,
    rstd: Array,
    grad: Array,
    grad_x: Array | None,
    grad_weight: Array | None,
    grad_bias: Array | None,
) -> None: ...
def cross_entropy_forward(logits: Array, targets: Array, ignore_index: int, losses: Array, lse: Array) -> int: ...
def cross_entropy_backward(
    logits: Array, targets: Array, ignore_index: int, lse: Array, grad: Array, out: Array
) -> None: ...
def embedding_backward(ids: Array, grad: Array, out: Array) -> None: ...
def getenv(name: str) -> str | None:
    """The process environment's value of name (os.environ writes through putenv), or None; cheap when unset."""

def set_threads(threads: int) -> None:
    """Threads a parallel pass may use from now on, the caller included (0: the pool's size again)."""

def threads() -> int:
    """Threads a parallel pass uses now, the caller included."""

def max_threads() -> int:
    """The pool's size, the caller included (MTA_NUM_THREADS, OMP_NUM_THREADS or the CPUs, read once)."""

def layout() -> dict[str, Any]:
    """Sizes and field offsets of the structs the CUDA kernels take by value, and the launch constants."""

def emulator_launch(kernel: str, grid: Sequence[int], block: Sequence[int], args: Sequence[Any]) -> None:
    """Run a CUDA kernel of csrc/*.cu on the CPU: pointers as int addresses or None, structs as bytes."""

def emulator_kernels() -> dict[str, tuple[int, int, bool]]:
    """Registered kernels: name -> (arity, max threads per block, uses __syncthreads)."""
def memory_counting_handler(numpy_handler: Any) -> Any:
    """A ``mem_handler`` capsule of the counting data-memory handler, forwarding to NumPy's handler given."""

def memory_probe_open(count_objects: bool) -> int:
    """Open a memory probe (arrays; Python objects too with count_objects); returns its number."""

def memory_probe_close(probe: int) -> tuple[int, int]:
    """Close a probe: (peak of its arrays, peak of its arrays and Python objects together)."""

def memory_counter_state() -> dict[str, Any]:
    """Open probes, tracked blocks and whether the Python-object hook is in the allocator chain."""

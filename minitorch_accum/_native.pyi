"""Native CPU kernels of minitorch_accum (SIMD loops over a thread pool, GIL released) and the CPU
launch emulator of its CUDA kernels. Private: use minitorch_accum.kernels.

Arrays are NumPy arrays, C-contiguous, of matching sizes (shapes may differ);
accumulators are written in place. Errors name the kernel and each argument's
shape and dtype. The optimizer steps take scalars already derived on the host
(minitorch_accum.kernels.hyperparameters) and round each once to the dtype.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np

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
def sgd_momentum_step(
    param: Array,
    grad: Array,
    momentum_buf: Array | None,
    lr: float,
    momentum: float,
    dampening_complement: float,
    weight_decay: float,
    grad_scale: float,
    nesterov: bool,
    first_step: bool,
) -> None: ...
def multi_sgd_momentum_step(
    params: Sequence[Array],
    grads: Sequence[Array],
    momentum_bufs: Sequence[Array] | None,
    lr: float,
    momentum: float,
    dampening_complement: float,
    weight_decay: float,
    grad_scale: float,
    nesterov: bool,
    first_step: bool,
) -> None: ...
def adamw_step(
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
    decay: float,
    weight_decay: float,
    beta1: float,
    beta1_complement: float,
    beta2: float,
    beta2_complement: float,
    step_size: float,
    bias_correction2_sqrt: float,
    eps: float,
    grad_scale: float,
    decoupled: bool,
) -> None: ...
def multi_adamw_step(
    params: Sequence[Array],
    grads: Sequence[Array],
    exp_avgs: Sequence[Array],
    exp_avg_sqs: Sequence[Array],
    decay: float,
    weight_decay: float,
    beta1: float,
    beta1_complement: float,
    beta2: float,
    beta2_complement: float,
    step_size: float,
    bias_correction2_sqrt: float,
    eps: float,
    grad_scale: float,
    decoupled: bool,
) -> None: ...
def layout() -> dict[str, Any]:
    """Sizes and field offsets of the structs the CUDA kernels take by value, and the launch constants."""

def emulator_launch(kernel: str, grid: Sequence[int], block: Sequence[int], args: Sequence[Any]) -> None:
    """Run a CUDA kernel of csrc/*.cu on the CPU: pointers as int addresses or None, structs as bytes."""

def emulator_kernels() -> dict[str, tuple[int, int, bool]]:
    """Registered kernels: name -> (arity, max threads per block, uses __syncthreads)."""

"""Host-side scalars of the fused optimizer steps, derived once in float64.

Every path (NumPy reference, native, emulated, CuPy) receives the same
scalars object and rounds each field once to the parameter dtype, so the
steps agree bit for bit. The formulas follow PyTorch's SGD and AdamW; the
arguments are checked here, once, for every path (every scalar finite: a NaN or
infinite rate, decay, momentum or scale would write NaN into every parameter).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from minitorch_accum.kernels.validation import finite_number, real_number

__all__ = ["AdamScalars", "SgdScalars", "adam_scalars", "sgd_scalars"]


@dataclass(frozen=True)
class SgdScalars:
    """The fields of MTA_SGD_SCALARS in csrc/accum_math.cuh, in its order (float: T, bool: int).

    The native module reads them by name; the launch planner packs them as the struct.
    """

    lr: float
    momentum: float
    dampening_complement: float
    weight_decay: float
    grad_scale: float
    nesterov: bool
    first_step: bool


@dataclass(frozen=True)
class AdamScalars:
    """The fields of MTA_ADAM_SCALARS in csrc/accum_math.cuh, in its order (float: T, bool: int)."""

    decay: float
    weight_decay: float
    beta1: float
    beta1_complement: float
    beta2: float
    beta2_complement: float
    step_size: float
    bias_correction2_sqrt: float
    eps: float
    grad_scale: float
    decoupled: bool


def sgd_scalars(
    kernel: str,
    lr: float,
    momentum: float,
    dampening: float,
    weight_decay: float,
    nesterov: bool,
    grad_scale: float,
    first_step: bool,
) -> SgdScalars:
    """The scalars of one SGD step; errors name ``kernel``."""
    momentum = finite_number(kernel, "momentum", momentum)
    dampening = finite_number(kernel, "dampening", dampening)
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError(f"{kernel}: nesterov needs momentum > 0 and dampening == 0")
    return SgdScalars(
        lr=finite_number(kernel, "lr", lr),
        momentum=momentum,
        dampening_complement=1.0 - dampening,
        weight_decay=finite_number(kernel, "weight_decay", weight_decay),
        grad_scale=finite_number(kernel, "grad_scale", grad_scale),
        nesterov=bool(nesterov),
        first_step=bool(first_step),
    )


def _beta(kernel: str, name: str, value: object) -> float:
    beta = real_number(kernel, name, value)
    # beta1 = 1 would divide by 1 - beta1^step = 0; PyTorch refuses both ends too
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"{kernel}: {name} must be in [0, 1), got {value!r}")
    return beta


def _step(kernel: str, step: object) -> int:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"{kernel}: step must be an integer (the step count, from 1), got {step!r}")
    if step < 1:
        raise ValueError(f"{kernel}: step counts from 1, got {step}")
    return int(step)


def adam_scalars(
    kernel: str,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    grad_scale: float,
    decoupled: bool,
) -> AdamScalars:
    """The scalars of one AdamW (decoupled) or Adam-L2 step; errors name ``kernel``."""
    lr = finite_number(kernel, "lr", lr)
    weight_decay = finite_number(kernel, "weight_decay", weight_decay)
    beta1, beta2 = _beta(kernel, "beta1", beta1), _beta(kernel, "beta2", beta2)
    step = _step(kernel, step)
    return AdamScalars(
        decay=1.0 - lr * weight_decay,
        weight_decay=weight_decay,
        beta1=beta1,
        beta1_complement=1.0 - beta1,
        beta2=beta2,
        beta2_complement=1.0 - beta2,
        step_size=lr / (1.0 - beta1**step),
        bias_correction2_sqrt=math.sqrt(1.0 - beta2**step),
        eps=finite_number(kernel, "eps", eps),
        grad_scale=finite_number(kernel, "grad_scale", grad_scale),
        decoupled=bool(decoupled),
    )

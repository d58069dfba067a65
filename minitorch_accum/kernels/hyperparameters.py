"""Host-side scalars of the fused optimizer steps, derived once in float64.

Every path (NumPy reference, native, emulated, CuPy) receives these same
Python floats and rounds each once to the parameter dtype, so the steps agree
bit for bit. The formulas follow PyTorch's SGD and AdamW.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["AdamScalars", "SgdScalars", "adam_scalars", "sgd_scalars"]


@dataclass(frozen=True)
class SgdScalars:
    """Mirrors MtaSgdScalars in csrc/accum_math.cuh; the field order is the native argument order."""

    lr: float
    momentum: float
    dampening_complement: float
    weight_decay: float
    grad_scale: float
    nesterov: bool
    first_step: bool


@dataclass(frozen=True)
class AdamScalars:
    """Mirrors MtaAdamScalars in csrc/accum_math.cuh; the field order is the native argument order."""

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
    *,
    lr: float,
    momentum: float,
    dampening: float,
    weight_decay: float,
    nesterov: bool,
    grad_scale: float,
    first_step: bool,
) -> SgdScalars:
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError("sgd_momentum_step: nesterov needs momentum > 0 and dampening == 0")
    return SgdScalars(
        lr=float(lr),
        momentum=float(momentum),
        dampening_complement=1.0 - float(dampening),
        weight_decay=float(weight_decay),
        grad_scale=float(grad_scale),
        nesterov=bool(nesterov),
        first_step=bool(first_step),
    )


def adam_scalars(
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    grad_scale: float,
    decoupled: bool,
) -> AdamScalars:
    if step < 1:
        raise ValueError(f"adamw_step: step counts from 1, got {step}")
    bias_correction1 = 1.0 - float(beta1) ** step
    bias_correction2 = 1.0 - float(beta2) ** step
    return AdamScalars(
        decay=1.0 - float(lr) * float(weight_decay),
        weight_decay=float(weight_decay),
        beta1=float(beta1),
        beta1_complement=1.0 - float(beta1),
        beta2=float(beta2),
        beta2_complement=1.0 - float(beta2),
        step_size=float(lr) / bias_correction1,
        bias_correction2_sqrt=math.sqrt(bias_correction2),
        eps=float(eps),
        grad_scale=float(grad_scale),
        decoupled=bool(decoupled),
    )

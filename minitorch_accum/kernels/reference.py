"""Pure NumPy reference of every kernel: the oracle the other paths must match.

Each function has the signature of its public twin in minitorch_accum.kernels
and makes the same argument checks. The arithmetic is written in the order of
csrc/accum_math.cuh with scalars rounded once to the accumulator dtype, so the
native, emulated and CUDA paths agree with it bit for bit; only the L2 norm,
summed here in float64, may differ from them by rounding (summation order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels import modes
from minitorch_accum.kernels.hyperparameters import adam_scalars, sgd_scalars
from minitorch_accum.kernels.validation import (
    check_accumulate,
    check_accumulate_lists,
    check_flag,
    check_lengths,
    check_norm_input,
    check_step,
)

__all__ = [
    "adamw_step",
    "add_scale",
    "add_scale_compensated",
    "cast_add_scale",
    "copy_scale",
    "copy_scale_compensated",
    "l2_norm",
    "multi_adamw_step",
    "multi_add_scale",
    "multi_add_scale_compensated",
    "multi_cast_add_scale",
    "multi_copy_scale",
    "multi_copy_scale_compensated",
    "multi_l2_norm",
    "multi_sgd_momentum_step",
    "sgd_momentum_step",
]


def _accumulate(
    mode: int, acc: np.ndarray, comp: np.ndarray | None, g: np.ndarray, scale: float, flag: np.ndarray | None
) -> None:
    a = acc.reshape(-1)
    s = acc.dtype.type(float(scale))
    # inf - inf and overflow are expected here (they are what the flag reports);
    # NumPy must not warn about them.
    with np.errstate(all="ignore"):
        widened = g.reshape(-1).astype(acc.dtype)  # exact: f16/bf16 -> f32, f32 -> f64
        if flag is not None and not np.isfinite(widened).all():
            flag[0] = 1
        y = s * widened
        if mode == modes.ADD:
            np.add(a, y, out=a)
        elif mode == modes.COPY:
            a[...] = y
        elif mode == modes.ADD_COMPENSATED:
            assert comp is not None
            c = comp.reshape(-1)
            t = a + y
            lost_from_y = (a - t) + y
            lost_from_acc = (y - t) + a
            np.add(c, np.where(np.abs(a) >= np.abs(y), lost_from_y, lost_from_acc), out=c)
            a[...] = t
        else:
            assert comp is not None
            a[...] = y
            comp.reshape(-1)[...] = 0


def _one(kernel: str, mode: int, acc: Any, comp: Any, g: Any, scale: float, flag: Any, cast_only: bool = False) -> None:
    compensated = modes.is_compensated(mode)
    check_accumulate(kernel, acc, g, comp, compensated=compensated, cast_only=cast_only)
    check_flag(kernel, flag)
    _accumulate(mode, acc, comp, g, scale, flag)


def _many(
    kernel: str,
    mode: int,
    accs: Sequence[Any],
    comps: Sequence[Any] | None,
    gs: Sequence[Any],
    scale: float,
    flag: Any,
    cast_only: bool = False,
) -> None:
    compensated = modes.is_compensated(mode)
    check_accumulate_lists(kernel, accs, comps, gs, compensated=compensated, cast_only=cast_only)
    check_flag(kernel, flag)
    for i, (acc, g) in enumerate(zip(accs, gs, strict=True)):
        _accumulate(mode, acc, comps[i] if compensated and comps is not None else None, g, scale, flag)


def add_scale(acc: np.ndarray, g: np.ndarray, scale: float, flag: np.ndarray | None = None) -> None:
    """acc += s * g, s = scale rounded to acc's dtype."""
    _one("add_scale", modes.ADD, acc, None, g, scale, flag)


def copy_scale(acc: np.ndarray, g: np.ndarray, scale: float, flag: np.ndarray | None = None) -> None:
    """acc = s * g."""
    _one("copy_scale", modes.COPY, acc, None, g, scale, flag)


def cast_add_scale(acc: np.ndarray, g: np.ndarray, scale: float, flag: np.ndarray | None = None) -> None:
    """acc(f32) += s * float(g) for f16/bf16 g."""
    _one("cast_add_scale", modes.ADD, acc, None, g, scale, flag, cast_only=True)


def add_scale_compensated(
    acc: np.ndarray, comp: np.ndarray, g: np.ndarray, scale: float, flag: np.ndarray | None = None
) -> None:
    """Neumaier summation of s * g into (acc, comp)."""
    _one("add_scale_compensated", modes.ADD_COMPENSATED, acc, comp, g, scale, flag)


def copy_scale_compensated(
    acc: np.ndarray, comp: np.ndarray, g: np.ndarray, scale: float, flag: np.ndarray | None = None
) -> None:
    """acc = s * g, comp = 0."""
    _one("copy_scale_compensated", modes.COPY_COMPENSATED, acc, comp, g, scale, flag)


def multi_add_scale(
    accs: Sequence[np.ndarray], gs: Sequence[np.ndarray], scale: float, flag: np.ndarray | None = None
) -> None:
    _many("multi_add_scale", modes.ADD, accs, None, gs, scale, flag)


def multi_copy_scale(
    accs: Sequence[np.ndarray], gs: Sequence[np.ndarray], scale: float, flag: np.ndarray | None = None
) -> None:
    _many("multi_copy_scale", modes.COPY, accs, None, gs, scale, flag)


def multi_cast_add_scale(
    accs: Sequence[np.ndarray], gs: Sequence[np.ndarray], scale: float, flag: np.ndarray | None = None
) -> None:
    _many("multi_cast_add_scale", modes.ADD, accs, None, gs, scale, flag, cast_only=True)


def multi_add_scale_compensated(
    accs: Sequence[np.ndarray],
    comps: Sequence[np.ndarray],
    gs: Sequence[np.ndarray],
    scale: float,
    flag: np.ndarray | None = None,
) -> None:
    _many("multi_add_scale_compensated", modes.ADD_COMPENSATED, accs, comps, gs, scale, flag)


def multi_copy_scale_compensated(
    accs: Sequence[np.ndarray],
    comps: Sequence[np.ndarray],
    gs: Sequence[np.ndarray],
    scale: float,
    flag: np.ndarray | None = None,
) -> None:
    _many("multi_copy_scale_compensated", modes.COPY_COMPENSATED, accs, comps, gs, scale, flag)


def _sum_squares(x: np.ndarray) -> float:
    v = x.reshape(-1).astype(np.float64)
    with np.errstate(all="ignore"):
        return float(np.dot(v, v))


def l2_norm(x: np.ndarray) -> float:
    """Euclidean norm of all elements, summed in float64."""
    check_norm_input("l2_norm", "x", x)
    return math.sqrt(_sum_squares(x))


def multi_l2_norm(tensors: Sequence[np.ndarray]) -> float:
    """Global Euclidean norm of all elements of a list of arrays, summed in float64."""
    check_lengths("multi_l2_norm", [("tensors", tensors)])
    for i, x in enumerate(tensors):
        check_norm_input("multi_l2_norm", f"tensors[{i}]", x)
    return math.sqrt(sum(_sum_squares(x) for x in tensors))


def _sgd(param: np.ndarray, grad: np.ndarray, buf: np.ndarray | None, h: Any) -> None:
    t = param.dtype.type
    p = param.reshape(-1)
    lr, momentum, weight_decay = t(h.lr), t(h.momentum), t(h.weight_decay)
    with np.errstate(all="ignore"):
        scaled = grad.reshape(-1) * t(h.grad_scale)
        g = scaled + weight_decay * p if weight_decay != 0 else scaled
        if momentum != 0:
            assert buf is not None
            b_arr = buf.reshape(-1)
            b = g.copy() if h.first_step else momentum * b_arr + t(h.dampening_complement) * g
            b_arr[...] = b
            g = g + momentum * b if h.nesterov else b
        p[...] = p - lr * g


def sgd_momentum_step(
    param: np.ndarray,
    grad: np.ndarray,
    momentum_buf: np.ndarray | None,
    *,
    lr: float,
    momentum: float,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    grad_scale: float = 1.0,
    first_step: bool = False,
) -> None:
    """One SGD(-momentum) step in place, PyTorch semantics (see accum_math.cuh)."""
    h = sgd_scalars(
        lr=lr,
        momentum=momentum,
        dampening=dampening,
        weight_decay=weight_decay,
        nesterov=nesterov,
        grad_scale=grad_scale,
        first_step=first_step,
    )
    check_step("sgd_momentum_step", "param", param, "grad", grad, [("momentum_buf", momentum_buf, momentum != 0)])
    _sgd(param, grad, momentum_buf, h)


def multi_sgd_momentum_step(
    params: Sequence[np.ndarray],
    grads: Sequence[np.ndarray],
    momentum_bufs: Sequence[np.ndarray] | None,
    *,
    lr: float,
    momentum: float,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    grad_scale: float = 1.0,
    first_step: bool = False,
) -> None:
    kernel = "multi_sgd_momentum_step"
    h = sgd_scalars(
        lr=lr,
        momentum=momentum,
        dampening=dampening,
        weight_decay=weight_decay,
        nesterov=nesterov,
        grad_scale=grad_scale,
        first_step=first_step,
    )
    named = [("params", params), ("grads", grads)]
    if momentum_bufs is not None or momentum != 0:
        named.append(("momentum_bufs", momentum_bufs))  # type: ignore[arg-type]
    check_lengths(kernel, named)
    bufs = list(momentum_bufs) if momentum_bufs is not None else [None] * len(params)
    for i, (p, g, b) in enumerate(zip(params, grads, bufs, strict=True)):
        check_step(kernel, f"params[{i}]", p, f"grads[{i}]", g, [(f"momentum_bufs[{i}]", b, momentum != 0)])
    for p, g, b in zip(params, grads, bufs, strict=True):
        _sgd(p, g, b, h)


def _adam(param: np.ndarray, grad: np.ndarray, exp_avg: np.ndarray, exp_avg_sq: np.ndarray, h: Any) -> None:
    t = param.dtype.type
    p, m, v = param.reshape(-1), exp_avg.reshape(-1), exp_avg_sq.reshape(-1)
    weight_decay = t(h.weight_decay)
    with np.errstate(all="ignore"):
        scaled = grad.reshape(-1) * t(h.grad_scale)
        g = scaled + weight_decay * p if (not h.decoupled and weight_decay != 0) else scaled
        q = p * t(h.decay) if h.decoupled else p
        m[...] = t(h.beta1) * m + t(h.beta1_complement) * g
        v[...] = t(h.beta2) * v + t(h.beta2_complement) * (g * g)
        denom = np.sqrt(v) / t(h.bias_correction2_sqrt) + t(h.eps)
        p[...] = q - t(h.step_size) * (m / denom)


def adamw_step(
    param: np.ndarray,
    grad: np.ndarray,
    exp_avg: np.ndarray,
    exp_avg_sq: np.ndarray,
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    grad_scale: float = 1.0,
    decoupled: bool = True,
) -> None:
    """One AdamW (decoupled) or Adam-L2 step in place (see accum_math.cuh for the formula)."""
    h = adam_scalars(
        lr=lr,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        weight_decay=weight_decay,
        step=step,
        grad_scale=grad_scale,
        decoupled=decoupled,
    )
    check_step(
        "adamw_step", "param", param, "grad", grad, [("exp_avg", exp_avg, True), ("exp_avg_sq", exp_avg_sq, True)]
    )
    _adam(param, grad, exp_avg, exp_avg_sq, h)


def multi_adamw_step(
    params: Sequence[np.ndarray],
    grads: Sequence[np.ndarray],
    exp_avgs: Sequence[np.ndarray],
    exp_avg_sqs: Sequence[np.ndarray],
    *,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    step: int,
    grad_scale: float = 1.0,
    decoupled: bool = True,
) -> None:
    kernel = "multi_adamw_step"
    h = adam_scalars(
        lr=lr,
        beta1=beta1,
        beta2=beta2,
        eps=eps,
        weight_decay=weight_decay,
        step=step,
        grad_scale=grad_scale,
        decoupled=decoupled,
    )
    check_lengths(kernel, [("params", params), ("grads", grads), ("exp_avgs", exp_avgs), ("exp_avg_sqs", exp_avg_sqs)])
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs, strict=True)):
        check_step(
            kernel, f"params[{i}]", p, f"grads[{i}]", g, [(f"exp_avgs[{i}]", m, True), (f"exp_avg_sqs[{i}]", v, True)]
        )
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs, strict=True):
        _adam(p, g, m, v, h)

"""Pure NumPy reference of every kernel: the oracle the other paths must match.

Each function has the signature of its twin in the native module
(minitorch_accum._native): the optimizer steps take the scalars object of
``optimizer_scalars`` rather than keyword arguments, so one host branch of the
public face calls either module. Each makes the same argument checks, with the
same messages (``validation``). The arithmetic is written in the order of
csrc/accum_math.cuh with scalars rounded once to the accumulator dtype, so the
native, emulated and CUDA paths agree with it bit for bit; only the L2 norm,
an fp64 sum here too but in another order, may differ from them by rounding.
The fused layer kernels' references live in ``fused_reference`` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels import l2_scaling, modes
from minitorch_accum.kernels.fused_reference import (
    cross_entropy_backward,
    cross_entropy_forward,
    embedding_backward,
    gelu_backward,
    gelu_forward,
    layer_norm_backward,
    layer_norm_forward,
)
from minitorch_accum.kernels.optimizer_scalars import AdamScalars, SgdScalars
from minitorch_accum.kernels.validation import (
    ADAM_ARRAYS,
    SGD_ARRAYS,
    check_accumulate,
    check_norm,
    check_step,
    real_number,
)

__all__ = [
    "adamw_step",
    "add_scale",
    "add_scale_compensated",
    "cast_add_scale",
    "copy_scale",
    "copy_scale_compensated",
    "cross_entropy_backward",
    "cross_entropy_forward",
    "embedding_backward",
    "gelu_backward",
    "gelu_forward",
    "l2_norm",
    "layer_norm_backward",
    "layer_norm_forward",
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

Array = np.ndarray


def _accumulate(mode: int, acc: Array, comp: Array | None, g: Array, scale: float, flag: Array | None) -> None:
    a = acc.reshape(-1)
    s = acc.dtype.type(scale)
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


def _run(
    kernel: str, mode: int, accs: Any, comps: Any, gs: Any, scale: Any, flag: Any, listed: bool, cast_only: bool = False
) -> None:
    scale = real_number(kernel, "scale", scale)
    items = check_accumulate(
        kernel, accs, comps, gs, flag, listed=listed, compensated=modes.is_compensated(mode), cast_only=cast_only
    )
    for acc, comp, g in items:
        _accumulate(mode, acc, comp, g, scale, flag)


def add_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc += s * g, s = scale rounded to acc's dtype."""
    _run("add_scale", modes.ADD, acc, None, g, scale, flag, False)


def copy_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc = s * g."""
    _run("copy_scale", modes.COPY, acc, None, g, scale, flag, False)


def cast_add_scale(acc: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc(f32) += s * float(g) for f16/bf16 g."""
    _run("cast_add_scale", modes.ADD, acc, None, g, scale, flag, False, cast_only=True)


def add_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """Neumaier summation of s * g into (acc, comp)."""
    _run("add_scale_compensated", modes.ADD_COMPENSATED, acc, comp, g, scale, flag, False)


def copy_scale_compensated(acc: Array, comp: Array, g: Array, scale: float, flag: Array | None = None) -> None:
    """acc = s * g, comp = 0."""
    _run("copy_scale_compensated", modes.COPY_COMPENSATED, acc, comp, g, scale, flag, False)


def multi_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """add_scale over lists."""
    _run("multi_add_scale", modes.ADD, accs, None, gs, scale, flag, True)


def multi_copy_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """copy_scale over lists."""
    _run("multi_copy_scale", modes.COPY, accs, None, gs, scale, flag, True)


def multi_cast_add_scale(accs: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None) -> None:
    """cast_add_scale over lists."""
    _run("multi_cast_add_scale", modes.ADD, accs, None, gs, scale, flag, True, cast_only=True)


def multi_add_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None
) -> None:
    """add_scale_compensated over lists."""
    _run("multi_add_scale_compensated", modes.ADD_COMPENSATED, accs, comps, gs, scale, flag, True)


def multi_copy_scale_compensated(
    accs: Sequence[Array], comps: Sequence[Array], gs: Sequence[Array], scale: float, flag: Array | None = None
) -> None:
    """copy_scale_compensated over lists."""
    _run("multi_copy_scale_compensated", modes.COPY_COMPENSATED, accs, comps, gs, scale, flag, True)


def _sums(xs: Sequence[Array], scale: float) -> tuple[float, float]:
    """(sum of (scale * x)^2, max |scale * x|) over every element, in fp64."""
    total, largest = 0.0, 0.0
    with np.errstate(all="ignore"):  # overflow to inf is what the caller looks for
        for x in xs:
            v = x.reshape(-1).astype(np.float64) * scale
            total += float(np.dot(v, v))
            if v.size:
                largest = max(largest, float(np.max(np.abs(v))))
    return total, largest


def l2_norm(x: Array) -> float:
    """Euclidean norm of all elements, summed in float64 (scaled when fp64 squares would overflow)."""
    xs = check_norm("l2_norm", x, listed=False)
    return l2_scaling.norm_from_sums(lambda scale: _sums(xs, scale))


def multi_l2_norm(tensors: Sequence[Array]) -> float:
    """Global Euclidean norm of all elements of a list of arrays, summed in float64."""
    xs = check_norm("multi_l2_norm", tensors, listed=True)
    return l2_scaling.norm_from_sums(lambda scale: _sums(xs, scale))


def _sgd(param: Array, grad: Array, buf: Array | None, h: SgdScalars) -> None:
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


def _adam(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, h: AdamScalars) -> None:
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


def sgd_momentum_step(param: Array, grad: Array, momentum_buf: Array | None, scalars: SgdScalars) -> None:
    """One SGD(-momentum) step in place, PyTorch semantics (see accum_math.cuh)."""
    for p, g, b in check_step(
        "sgd_momentum_step", SGD_ARRAYS, (param, grad, momentum_buf), listed=False, momentum=scalars.momentum
    ):
        _sgd(p, g, b, scalars)


def multi_sgd_momentum_step(
    params: Sequence[Array], grads: Sequence[Array], momentum_bufs: Sequence[Array] | None, scalars: SgdScalars
) -> None:
    """sgd_momentum_step over lists."""
    for p, g, b in check_step(
        "multi_sgd_momentum_step", SGD_ARRAYS, (params, grads, momentum_bufs), listed=True, momentum=scalars.momentum
    ):
        _sgd(p, g, b, scalars)


def adamw_step(param: Array, grad: Array, exp_avg: Array, exp_avg_sq: Array, scalars: AdamScalars) -> None:
    """One AdamW (decoupled) or Adam-L2 step in place (see accum_math.cuh for the formula)."""
    for p, g, m, v in check_step("adamw_step", ADAM_ARRAYS, (param, grad, exp_avg, exp_avg_sq), listed=False):
        _adam(p, g, m, v, scalars)


def multi_adamw_step(
    params: Sequence[Array],
    grads: Sequence[Array],
    exp_avgs: Sequence[Array],
    exp_avg_sqs: Sequence[Array],
    scalars: AdamScalars,
) -> None:
    """adamw_step over lists."""
    for p, g, m, v in check_step("multi_adamw_step", ADAM_ARRAYS, (params, grads, exp_avgs, exp_avg_sqs), listed=True):
        _adam(p, g, m, v, scalars)

"""Fused optimizer steps that read the accumulated gradient in place.

``grad_scale`` folds the window's normalization (1/k or 1/N_items) and any
loss-scale unscale into the step, so normalizing costs no pass of its own.
Semantics follow PyTorch's SGD and AdamW; the exact formula is in
csrc/accum_math.cuh, the host scalars (derived and checked once, for every
path) in optimizer_scalars.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.catalog import kernel_info
from minitorch_accum.kernels.dispatch import call_device, host_module
from minitorch_accum.kernels.launch.plan import plan_adam, plan_multi_adam, plan_multi_sgd, plan_sgd
from minitorch_accum.kernels.launch.runners import runner_for
from minitorch_accum.kernels.optimizer_scalars import AdamScalars, SgdScalars, adam_scalars, sgd_scalars
from minitorch_accum.kernels.validation import ADAM_ARRAYS, SGD_ARRAYS, check_step

__all__ = ["adamw_step", "multi_adamw_step", "multi_sgd_momentum_step", "sgd_momentum_step"]

def _step(
    kernel: str, names: Sequence[str], values: tuple[Array | Sequence[Array] | None, ...], h: SgdScalars | AdamScalars
) -> None:
    """One step call: ``values`` are one array per role, or lists of them for a multi_* kernel."""
    listed = kernel_info(kernel).listed
    momentum = h.momentum if isinstance(h, SgdScalars) else None
    # SGD's buffers may be None (no momentum); whether they must be there is checked below
    device = call_device(kernel, names, values, listed=listed, optional=names[2:] if momentum is not None else ())
    if device == "host" and (module := host_module()) is not None:
        getattr(module, kernel)(*values, h)
        return
    items = check_step(kernel, names, values, listed=listed, momentum=momentum)
    runner = runner_for(device)
    if isinstance(h, SgdScalars):
        if listed:
            launches = plan_multi_sgd(items, h, runner.address_of)
        else:
            param, grad, buf = items[0]
            launches = plan_sgd(param, grad, buf, h, runner.sm_count)
    elif listed:
        launches = plan_multi_adam(items, h, runner.address_of)
    else:
        param, grad, exp_avg, exp_avg_sq = items[0]
        launches = plan_adam(param, grad, exp_avg, exp_avg_sq, h, runner.sm_count)
    runner.run(launches)


def sgd_momentum_step(
    param: Array,
    grad: Array,
    momentum_buf: Array | None,
    *,
    lr: float,
    momentum: float,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    grad_scale: float = 1.0,
    first_step: bool = False,
) -> None:
    """One SGD step in place, PyTorch semantics, on g = grad * grad_scale (20 B/elem fp32):

    g += weight_decay * p; buf = g on the first step else momentum * buf + (1 - dampening) * g;
    p -= lr * (g + momentum * buf if nesterov else buf). momentum_buf may be None when momentum == 0.
    """
    kernel = "sgd_momentum_step"
    h = sgd_scalars(kernel, lr, momentum, dampening, weight_decay, nesterov, grad_scale, first_step)
    _step(kernel, SGD_ARRAYS, (param, grad, momentum_buf), h)


def multi_sgd_momentum_step(
    params: Sequence[Array],
    grads: Sequence[Array],
    momentum_bufs: Sequence[Array] | None,
    *,
    lr: float,
    momentum: float,
    dampening: float = 0.0,
    weight_decay: float = 0.0,
    nesterov: bool = False,
    grad_scale: float = 1.0,
    first_step: bool = False,
) -> None:
    """sgd_momentum_step over lists of (param, grad, buf); float32 and float64 may mix."""
    kernel = "multi_sgd_momentum_step"
    h = sgd_scalars(kernel, lr, momentum, dampening, weight_decay, nesterov, grad_scale, first_step)
    _step(kernel, SGD_ARRAYS, (params, grads, momentum_bufs), h)


def adamw_step(
    param: Array,
    grad: Array,
    exp_avg: Array,
    exp_avg_sq: Array,
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
    """One AdamW step in place on g = grad * grad_scale (28 B/elem fp32):

    p *= 1 - lr * wd (decoupled; decoupled=False adds wd * p to g instead, Adam's L2);
    m = b1 * m + (1 - b1) * g; v = b2 * v + (1 - b2) * g * g;
    p -= (lr / (1 - b1^step)) * (m / (sqrt(v) / sqrt(1 - b2^step) + eps)).
    beta1 and beta2 in [0, 1), step an integer from 1.
    """
    kernel = "adamw_step"
    h = adam_scalars(kernel, lr, beta1, beta2, eps, weight_decay, step, grad_scale, decoupled)
    _step(kernel, ADAM_ARRAYS, (param, grad, exp_avg, exp_avg_sq), h)


def multi_adamw_step(
    params: Sequence[Array],
    grads: Sequence[Array],
    exp_avgs: Sequence[Array],
    exp_avg_sqs: Sequence[Array],
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
    """adamw_step over lists of (param, grad, exp_avg, exp_avg_sq); float32 and float64 may mix."""
    kernel = "multi_adamw_step"
    h = adam_scalars(kernel, lr, beta1, beta2, eps, weight_decay, step, grad_scale, decoupled)
    _step(kernel, ADAM_ARRAYS, (params, grads, exp_avgs, exp_avg_sqs), h)

"""Fused optimizer steps that read the accumulated gradient in place.

``grad_scale`` folds the window's normalization (1/k or 1/N_items) and any
loss-scale unscale into the step, so normalizing costs no pass of its own.
Semantics follow PyTorch's SGD and AdamW; the exact formula is in
csrc/accum_math.cuh, the host scalars in hyperparameters.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple
from typing import Any

import numpy as np

from minitorch_accum.kernels import reference
from minitorch_accum.kernels.dispatch import cpu_path, native, one_device
from minitorch_accum.kernels.hyperparameters import adam_scalars, sgd_scalars
from minitorch_accum.kernels.launch_plan import plan_adam, plan_multi_adam, plan_multi_sgd, plan_sgd
from minitorch_accum.kernels.runners import runner_for
from minitorch_accum.kernels.validation import check_lengths, check_step

__all__ = ["adamw_step", "multi_adamw_step", "multi_sgd_momentum_step", "sgd_momentum_step"]

Array = Any


def _device(kernel: str, named: Sequence[tuple[str, Any]]) -> str:
    if all(x is None or type(x) is np.ndarray for _, x in named):
        return "host"
    return one_device(kernel, named)


def _lists_device(kernel: str, named: Sequence[tuple[str, Sequence[Any] | None]]) -> str:
    check_lengths(kernel, [(role, items) for role, items in named if items is not None])
    return _device(
        kernel, [(f"{role}[{i}]", x) for role, items in named if items is not None for i, x in enumerate(items)]
    )


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
    h = sgd_scalars(
        lr=lr,
        momentum=momentum,
        dampening=dampening,
        weight_decay=weight_decay,
        nesterov=nesterov,
        grad_scale=grad_scale,
        first_step=first_step,
    )
    device = _device(kernel, [("param", param), ("grad", grad), ("momentum_buf", momentum_buf)])
    if device == "host":
        path = cpu_path()
        if path == "native":
            native().sgd_momentum_step(param, grad, momentum_buf, *astuple(h))
            return
        if path == "reference":
            reference.sgd_momentum_step(
                param,
                grad,
                momentum_buf,
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                grad_scale=grad_scale,
                first_step=first_step,
            )
            return
    check_step(kernel, "param", param, "grad", grad, [("momentum_buf", momentum_buf, momentum != 0)])
    runner = runner_for(device)
    runner.run(plan_sgd(param, grad, momentum_buf, h, runner.sm_count))


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
    h = sgd_scalars(
        lr=lr,
        momentum=momentum,
        dampening=dampening,
        weight_decay=weight_decay,
        nesterov=nesterov,
        grad_scale=grad_scale,
        first_step=first_step,
    )
    if momentum_bufs is None and momentum != 0:
        raise ValueError(f"{kernel}: momentum_bufs is required when momentum != 0")
    device = _lists_device(kernel, [("params", params), ("grads", grads), ("momentum_bufs", momentum_bufs)])
    if device == "host":
        path = cpu_path()
        if path == "native":
            native().multi_sgd_momentum_step(params, grads, momentum_bufs, *astuple(h))
            return
        if path == "reference":
            reference.multi_sgd_momentum_step(
                params,
                grads,
                momentum_bufs,
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                grad_scale=grad_scale,
                first_step=first_step,
            )
            return
    bufs = list(momentum_bufs) if momentum_bufs is not None else [None] * len(params)
    for i, (p, g, b) in enumerate(zip(params, grads, bufs, strict=True)):
        check_step(kernel, f"params[{i}]", p, f"grads[{i}]", g, [(f"momentum_bufs[{i}]", b, momentum != 0)])
    runner = runner_for(device)
    runner.run(plan_multi_sgd(params, grads, momentum_bufs, h, runner.address_of))


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
    """
    kernel = "adamw_step"
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
    device = _device(kernel, [("param", param), ("grad", grad), ("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)])
    if device == "host":
        path = cpu_path()
        if path == "native":
            native().adamw_step(param, grad, exp_avg, exp_avg_sq, *astuple(h))
            return
        if path == "reference":
            reference.adamw_step(
                param,
                grad,
                exp_avg,
                exp_avg_sq,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                eps=eps,
                weight_decay=weight_decay,
                step=step,
                grad_scale=grad_scale,
                decoupled=decoupled,
            )
            return
    check_step(kernel, "param", param, "grad", grad, [("exp_avg", exp_avg, True), ("exp_avg_sq", exp_avg_sq, True)])
    runner = runner_for(device)
    runner.run(plan_adam(param, grad, exp_avg, exp_avg_sq, h, runner.sm_count))


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
    device = _lists_device(
        kernel, [("params", params), ("grads", grads), ("exp_avgs", exp_avgs), ("exp_avg_sqs", exp_avg_sqs)]
    )
    if device == "host":
        path = cpu_path()
        if path == "native":
            native().multi_adamw_step(params, grads, exp_avgs, exp_avg_sqs, *astuple(h))
            return
        if path == "reference":
            reference.multi_adamw_step(
                params,
                grads,
                exp_avgs,
                exp_avg_sqs,
                lr=lr,
                beta1=beta1,
                beta2=beta2,
                eps=eps,
                weight_decay=weight_decay,
                step=step,
                grad_scale=grad_scale,
                decoupled=decoupled,
            )
            return
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs, strict=True)):
        check_step(
            kernel, f"params[{i}]", p, f"grads[{i}]", g, [(f"exp_avgs[{i}]", m, True), (f"exp_avg_sqs[{i}]", v, True)]
        )
    runner = runner_for(device)
    runner.run(plan_multi_adam(params, grads, exp_avgs, exp_avg_sqs, h, runner.address_of))

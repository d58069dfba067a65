"""Fused layer kernels where NumPy would make temporaries: GELU, LayerNorm, softmax cross
entropy, embedding backward, softmax rows (attention's).

Each computes in the stored dtype (float32 in float32 SIMD, float64 in float64), with our
own exp, log, erf and normal distribution (csrc/fused_math.cuh), so the NumPy reference
(``fused_reference``), the native loops, the emulated CUDA kernels and CUDA itself give the
same bits; tests/kernels/test_kernel_fused_accuracy.py states the float32 error bounds.
Like every kernel here they dispatch on the arrays: CuPy arrays run the CUDA
kernels, NumPy arrays the path of ``kernel_path()``. Outputs are allocated when not given.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from minitorch_accum.kernels import fused_reference
from minitorch_accum.kernels.arrays import Array
from minitorch_accum.kernels.dispatch import call_device, host_module, is_cupy_array
from minitorch_accum.kernels.launch import fused_plan
from minitorch_accum.kernels.launch.runners import Runner, runner_for
from minitorch_accum.kernels.validation import real_number

__all__ = ["GELU_FORMS", *fused_reference.FUSED_KERNELS]

#: the ``approximate`` values of the GELU kernels (PyTorch's names)
GELU_FORMS = ("none", "tanh")


def _xp(x: Array) -> ModuleType:
    """numpy or cupy, whichever holds ``x``."""
    if is_cupy_array(x):
        import cupy

        module: ModuleType = cupy
        return module
    return np


def _target(kernel: str, names: tuple[str, ...], values: tuple[Array, ...]) -> ModuleType | Runner:
    """What runs the call: the host module (native or reference) for a host call on those paths,
    else the runner of the emulator or of the CUDA device."""
    device = call_device(kernel, names, values, listed=False)
    if device == "host" and (module := host_module()) is not None:
        return module
    return runner_for(device)


def _tanh(kernel: str, approximate: str) -> bool:
    if approximate not in GELU_FORMS:
        raise ValueError(f"{kernel}: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate == "tanh"


def _empty(like: Array, shape: tuple[int, ...], dtype: DTypeLike | None = None) -> Array:
    return _xp(like).empty(shape, dtype=like.dtype if dtype is None else dtype)


def gelu_forward(x: Array, approximate: str = "none", out: Array | None = None) -> Array:
    """gelu(x), PyTorch's erf form or its tanh form (8 B/elem fp32)."""
    kernel = "gelu_forward"
    tanh = _tanh(kernel, approximate)
    target = _target(kernel, ("x", "out"), (x, out))
    out = _empty(x, tuple(x.shape)) if out is None else out
    if isinstance(target, ModuleType):
        target.gelu_forward(x, out, tanh)
        return out
    fused_reference.check_gelu(kernel, x, None, out)
    target.run(fused_plan.plan_gelu(x, None, out, tanh, target.sm_count))
    return out


def gelu_backward(x: Array, grad: Array, approximate: str = "none", out: Array | None = None) -> Array:
    """grad * gelu'(x) (12 B/elem fp32)."""
    kernel = "gelu_backward"
    tanh = _tanh(kernel, approximate)
    target = _target(kernel, ("x", "grad", "out"), (x, grad, out))
    out = _empty(x, tuple(x.shape)) if out is None else out
    if isinstance(target, ModuleType):
        target.gelu_backward(x, grad, out, tanh)
        return out
    fused_reference.check_gelu(kernel, x, grad, out)
    target.run(fused_plan.plan_gelu(x, grad, out, tanh, target.sm_count))
    return out


def layer_norm_forward(x: Array, weight: Array | None, bias: Array | None,
                       eps: float = 1e-5) -> tuple[Array, Array, Array]:
    """(y, mean, rstd): y = (x - mean) rstd weight + bias over the last axis of a 2-D x, with
    mean and rstd (float64, one per row) for the backward; weight and bias may be None
    (8 B/elem fp32)."""
    kernel = "layer_norm_forward"
    eps = real_number(kernel, "eps", eps)
    target = _target(kernel, ("x", "weight", "bias"), (x, weight, bias))
    rows = x.shape[0] if x.ndim else 0
    out, mean, rstd = _empty(x, tuple(x.shape)), _empty(x, (rows,), np.float64), _empty(x, (rows,), np.float64)
    if isinstance(target, ModuleType):
        target.layer_norm_forward(x, weight, bias, eps, out, mean, rstd)
        return out, mean, rstd
    fused_reference.check_layer_norm_forward(x, weight, bias, out, mean, rstd)
    target.run(fused_plan.plan_layer_norm_forward(x, weight, bias, eps, out, mean, rstd,
                                                  target.sm_count))
    return out, mean, rstd


def layer_norm_backward(x: Array, weight: Array | None, mean: Array, rstd: Array, grad: Array, *,
                        input_grad: bool = True, weight_grad: bool = True,
                        bias_grad: bool = True) -> tuple[Array, Array, Array]:
    """(grad_x, grad_weight, grad_bias) of layer_norm_forward, each None unless asked for
    (12 B/elem fp32)."""
    kernel = "layer_norm_backward"
    target = _target(kernel, ("x", "weight", "mean", "rstd", "grad"), (x, weight, mean, rstd, grad))
    columns = (x.shape[-1],) if x.ndim else (0,)
    grad_x = _empty(x, tuple(x.shape)) if input_grad else None
    grad_weight = _empty(x, columns) if weight_grad else None
    grad_bias = _empty(x, columns) if bias_grad else None
    if isinstance(target, ModuleType):
        target.layer_norm_backward(x, weight, mean, rstd, grad, grad_x, grad_weight, grad_bias)
        return grad_x, grad_weight, grad_bias
    fused_reference.check_layer_norm_backward(x, weight, mean, rstd, grad, grad_x, grad_weight, grad_bias)
    target.run(fused_plan.plan_layer_norm_backward(
        x, weight, mean, rstd, grad, grad_x, grad_weight, grad_bias, target.sm_count, target.empty_f64))
    return grad_x, grad_weight, grad_bias


def cross_entropy_forward(logits: Array, targets: Array, ignore_index: int = -100) -> tuple[Array, Array, int]:
    """(losses, lse, count) for 2-D logits and int64 targets: losses[i] = logsumexp(logits[i]) -
    logits[i, targets[i]] (0 where targets[i] == ignore_index), lse[i] = logsumexp(logits[i])
    (float64), count = the items not ignored (4 B/elem fp32)."""
    kernel = "cross_entropy_forward"
    ignore_index = operator.index(ignore_index)
    target = _target(kernel, ("logits", "targets"), (logits, targets))
    rows = logits.shape[0] if logits.ndim else 0
    losses, lse = _empty(logits, (rows,)), _empty(logits, (rows,), np.float64)
    if isinstance(target, ModuleType):
        count = target.cross_entropy_forward(logits, targets, ignore_index, losses, lse)
        return losses, lse, int(count)
    fused_reference.check_cross_entropy(kernel, logits, targets, ignore_index, [("losses", losses, True),
                                                                              ("lse", lse, True)])
    target.run(fused_plan.plan_cross_entropy_forward(logits, targets, ignore_index, losses, lse,
                                                     target.sm_count))
    return losses, lse, int((targets != ignore_index).sum())


def cross_entropy_backward(logits: Array, targets: Array, lse: Array, grad: Array, ignore_index: int = -100) -> Array:
    """grad[i] (softmax(logits[i]) - one_hot(targets[i])), 0 on ignored rows; ``grad`` holds one
    value per item (8 B/elem fp32)."""
    kernel = "cross_entropy_backward"
    ignore_index = operator.index(ignore_index)
    target = _target(kernel, ("logits", "targets", "lse", "grad"), (logits, targets, lse, grad))
    out = _empty(logits, tuple(logits.shape))
    if isinstance(target, ModuleType):
        target.cross_entropy_backward(logits, targets, ignore_index, lse, grad, out)
        return out
    fused_reference.check_cross_entropy(kernel, logits, targets, ignore_index,
                                        [("lse", lse, False), ("grad", grad, False), ("out", out, True)])
    target.run(fused_plan.plan_cross_entropy_backward(logits, targets, ignore_index, lse, grad, out,
                                                      target.sm_count))
    return out


def embedding_backward(ids: Array, grad: Array, rows: int) -> Array:
    """The (rows, dim) gradient of an embedding table: out[ids[i]] += grad[i] in order, for int64
    ids of shape (n,) and grad of shape (n, dim), with no np.add.at (4 B per gradient and per
    table element, fp32)."""
    kernel = "embedding_backward"
    rows = operator.index(rows)
    target = _target(kernel, ("ids", "grad"), (ids, grad))
    out = _empty(grad, (rows, grad.shape[-1] if grad.ndim else 0))
    if isinstance(target, ModuleType):
        target.embedding_backward(ids, grad, out)
        return out
    fused_reference.check_embedding(ids, grad, out)
    xp = _xp(ids)
    order = xp.argsort(ids, kind="stable") if xp is np else xp.argsort(ids)  # CuPy's radix sort is stable
    offsets = xp.zeros(rows + 1, dtype=np.int64)
    offsets[1:] = xp.cumsum(xp.bincount(ids, minlength=rows))
    target.run(fused_plan.plan_embedding_backward(order.astype(np.int64), offsets, grad, out,
                                                  target.sm_count))
    return out


def softmax_forward(x: Array, bias: Array | None = None, scale: float = 1.0, out: Array | None = None) -> Array:
    """softmax(x scale + bias) over each row of a 2-D x, in x's dtype: row r adds the bias's row
    r % its rows (an attention's mask, (L, S) for every (L, S) block of rows), or nothing when
    bias is None (8 B/elem fp32)."""
    return _softmax_rows("softmax_forward", ("x", "bias", "out"), x, bias, scale, out,
                         fused_plan.plan_softmax_forward)


def softmax_backward(probs: Array, grad: Array, scale: float = 1.0, out: Array | None = None) -> Array:
    """probs (grad - sum(grad probs)) scale over each row: the gradient of softmax_forward's x from
    its output ``probs`` (12 B/elem fp32)."""
    return _softmax_rows("softmax_backward", ("probs", "grad", "out"), probs, grad, scale, out,
                         fused_plan.plan_softmax_backward)


def _softmax_rows(kernel: str, names: tuple[str, str, str], rows: Array, other: Array | None, scale: float,
                  out: Array | None, plan: Callable[..., Any]) -> Array:
    """Either softmax kernel: ``out`` (made like ``rows`` when None) from ``rows``, ``other`` and the
    scale, by the native module's function of that name or the device's ``plan``."""
    scale = real_number(kernel, "scale", scale)
    target = _target(kernel, names, (rows, other, out))
    out = _empty(rows, tuple(rows.shape)) if out is None else out
    if isinstance(target, ModuleType):
        getattr(target, kernel)(rows, other, scale, out)
        return out
    fused_reference.check_softmax(kernel, rows, other, out)
    target.run(plan(rows, other, scale, out, target.sm_count))
    return out

"""Pure NumPy reference of every kernel: the oracle the other paths must match.

Every kernel of the catalog has its reference here, under its name and with its signature in
the native module (minitorch_accum._native), so one host branch of the public face calls
either module: the optimizer steps take the scalars object of ``optimizer_scalars`` rather
than keyword arguments. The references are built at import from the catalog's rows: a row's
family gives the math (``_FAMILIES``: one function per family, over the arguments its
signature binds), its name the argument checks and their messages (``validation``). The fused
layer kernels' references are their own bodies, in ``fused_reference``.

The arithmetic is written in the order of csrc/accum_math.cuh with scalars rounded once to the
accumulator dtype, so the native, emulated and CUDA paths agree with it bit for bit; only the
L2 norm, an fp64 sum here too but in another order, may differ from them by rounding.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minitorch_accum.kernels import fused_reference, l2_scaling, modes, rounding
from minitorch_accum.kernels.arrays import HostArray
from minitorch_accum.kernels.catalog import ACCUMULATE, ADAM, CATALOG, FUSED, KERNELS, L2_NORM, SGD, KernelInfo
from minitorch_accum.kernels.dtypes import BFLOAT16
from minitorch_accum.kernels.optimizer_scalars import AdamScalars, SgdScalars
from minitorch_accum.kernels.validation import (
    ADAM_ARRAYS,
    SGD_ARRAYS,
    check_accumulate,
    check_norm,
    check_step,
    check_stochastic,
    real_number,
    stream_integer,
)

__all__ = ["REFERENCE", *KERNELS]  # each kernel is set at the end, from the table

Array = HostArray


def _accumulate_bfloat16(mode: int, acc: Array, g: Array, scale: float, flag: Array | None,
                         stream: tuple[int, int, int, int] | None) -> None:
    """A bfloat16 accumulator: summed in float32 (scale rounded once to float32), each sum rounded
    back to nearest, or (``stream``: seed, window, micro_batch, first stream index) stochastically."""
    bits = acc.reshape(-1).view(np.uint16)
    with np.errstate(all="ignore"):
        widened = g.reshape(-1).astype(np.float32)  # exact: f16/bf16 -> f32
        if flag is not None and not np.isfinite(widened).all():
            flag[0] = 1
        total = np.float32(scale) * widened
        if modes.reads_acc(mode):
            total = (bits.astype(np.uint32) << np.uint32(16)).view(np.float32) + total
    if stream is None:
        bits[...] = rounding.round_nearest(total)
    else:
        bits[...] = rounding.round_stochastic(total, rounding.rounding_bits(*stream, bits.size))


def _accumulate(mode: int, acc: Array, comp: Array | None, g: Array, scale: float, flag: Array | None) -> None:
    if acc.dtype == BFLOAT16:
        _accumulate_bfloat16(mode, acc, g, scale, flag, None)
        return
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




# ------------------------------------------------- one function per family


def _run_accumulate(info: KernelInfo, *args: Any) -> None:
    """acc (+)= s * g by the row's mode over (acc[, comp], g, scale, flag), one array or lists; a
    stochastic row's over (acc, g, scale, seed, window, micro_batch, offset(s), flag)."""
    mode = info.mode
    assert mode is not None, info.name  # every accumulate row has one
    if modes.is_stochastic(mode):
        accs, gs, scale, seed, window, micro_batch, offsets, flag = args
        scale = real_number(info.name, "scale", scale)
        key = (stream_integer(info.name, "seed", seed, 64), stream_integer(info.name, "window", window, 32),
               stream_integer(info.name, "micro_batch", micro_batch, 32))
        items, firsts = check_stochastic(info.name, accs, gs, offsets, flag, listed=info.listed,
                                         cast_only=info.cast_only)
        for (acc, _, g), first in zip(items, firsts, strict=True):
            _accumulate_bfloat16(mode, acc, g, scale, flag, (*key, first))
        return
    compensated = modes.is_compensated(mode)
    if compensated:
        accs, comps, gs, scale, flag = args
    else:
        (accs, gs, scale, flag), comps = args, None
    scale = real_number(info.name, "scale", scale)
    items = check_accumulate(
        info.name, accs, comps, gs, flag, listed=info.listed, compensated=compensated, cast_only=info.cast_only
    )
    for acc, comp, g in items:
        _accumulate(mode, acc, comp, g, scale, flag)


def _run_l2_norm(info: KernelInfo, tensors: Array | Sequence[Array]) -> float:
    """The Euclidean norm of every element, summed in float64 (scaled when fp64 squares would overflow)."""
    xs = check_norm(info.name, tensors, listed=info.listed)
    return l2_scaling.norm_from_sums(lambda scale: _sums(xs, scale))


def _run_sgd(info: KernelInfo, *args: Any) -> None:
    """One SGD(-momentum) step in place over (param, grad, momentum_buf), PyTorch semantics."""
    *values, scalars = args
    for p, g, b in check_step(info.name, SGD_ARRAYS, values, listed=info.listed, momentum=scalars.momentum):
        _sgd(p, g, b, scalars)


def _run_adam(info: KernelInfo, *args: Any) -> None:
    """One AdamW (decoupled) or Adam-L2 step in place over (param, grad, exp_avg, exp_avg_sq)."""
    *values, scalars = args
    for p, g, m, v in check_step(info.name, ADAM_ARRAYS, values, listed=info.listed):
        _adam(p, g, m, v, scalars)


_FAMILIES: dict[str, Callable[..., Any]] = {
    ACCUMULATE: _run_accumulate,
    L2_NORM: _run_l2_norm,
    SGD: _run_sgd,
    ADAM: _run_adam,
}


def _signature(text: str) -> inspect.Signature:
    """The inspect.Signature of a catalog row's signature text; annotations stay text."""
    function = ast.parse(f"def f{text}: ...").body[0]
    assert isinstance(function, ast.FunctionDef)
    arguments = function.args.args
    defaults = [inspect.Parameter.empty] * (len(arguments) - len(function.args.defaults)) + [
        ast.literal_eval(d) for d in function.args.defaults
    ]
    parameters = [
        inspect.Parameter(
            a.arg,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=default,
            annotation=ast.unparse(a.annotation) if a.annotation else inspect.Parameter.empty,
        )
        for a, default in zip(arguments, defaults, strict=True)
    ]
    returns = ast.unparse(function.returns) if function.returns else inspect.Signature.empty
    return inspect.Signature(parameters, return_annotation=returns)


def _reference(info: KernelInfo) -> Callable[..., Any]:
    """The reference of one row: its family's function, called with the arguments its signature binds."""
    if info.family == FUSED:
        function: Callable[..., Any] = getattr(fused_reference, info.name)
        return function
    run = _FAMILIES[info.family]
    signature = _signature(info.signature)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return run(info, *bound.args)

    kernel.__name__ = kernel.__qualname__ = info.name
    kernel.__doc__ = f"{info.computes}: the NumPy reference of {info.name}."
    kernel.__signature__ = signature  # type: ignore[attr-defined]
    return kernel


#: each kernel's reference, by name, in the catalog's order
REFERENCE: dict[str, Callable[..., Any]] = {info.name: _reference(info) for info in CATALOG}
globals().update(REFERENCE)

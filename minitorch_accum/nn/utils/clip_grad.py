"""``nn.utils.clip_grad_norm_``, PyTorch's spelling, where gradients are values you hold.

In PyTorch the gradients sit on the parameters (``p.grad``), so ``clip_grad_norm_`` takes the
parameters. Here they live where backward put them: a ``Gradients`` container
(``grads = loss.backward()``) or an Accumulator's window (``acc.backward(...)``). So this takes
that container or that Accumulator: ``nn.utils.clip_grad_norm_(grads, 1.0)`` scales the
container's arrays in place; ``nn.utils.clip_grad_norm_(acc, 1.0)`` measures the window's
normalized gradient and folds the factor into the window's one scale, so clipping costs no
pass over the gradients (the optimizer's fused step applies it). Call it after the window's
last backward and before ``opt.step``. ``optim.clip_grad_norm`` is the same with a float result.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.autodiff import Gradients, Tensor
from minitorch_accum.nn.module import Module

__all__ = ["clip_grad_norm_"]

#: added to the norm before dividing, as PyTorch adds it
_EPS = 1e-6


def _total_norm(grads: Any) -> float:
    """The global L2 norm of a container's arrays, or an Accumulator's window."""
    if isinstance(grads, Gradients):
        by_device: dict[str, list[Any]] = {}
        for array in grads.values():
            by_device.setdefault(repr(getattr(array, "device", "cpu")), []).append(array)
        # hypot, not a sum of squares: a float64 norm above 1e154 would overflow when squared
        return math.hypot(*(kernels.multi_l2_norm(arrays) for arrays in by_device.values()))
    return float(grads.grad_norm())


def _refuse(grads: Any) -> None:
    """A TypeError for what a PyTorch user passes: the model, its parameters, a tensor."""
    is_params = isinstance(grads, Module | Tensor) or (
        isinstance(grads, Iterable) and not isinstance(grads, str | bytes | dict))
    hint = ("gradients are not stored on parameters here (Burn's design): pass the Gradients container "
            "that backward returned (grads = loss.backward(); nn.utils.clip_grad_norm_(grads, max_norm)) "
            "or the Accumulator holding the window (nn.utils.clip_grad_norm_(acc, max_norm))")
    what = "parameters" if is_params else f"a {type(grads).__name__}"
    raise TypeError(f"clip_grad_norm_: got {what}; {hint}")


def clip_grad_norm_(grads: Any, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients so that their global L2 norm is at most ``max_norm`` (by
    ``max_norm / (norm + 1e-6)`` when above it, as PyTorch); return the norm measured before,
    as a 0-d float64 tensor (``.item()`` gives the number).

    ``grads`` is a Gradients container (scaled in place) or an Accumulator (its window's scale
    takes the factor); see the module docstring. Only the L2 norm is offered (``norm_type=2``):
    the Accumulator's norm kernel computes that one. A non-finite norm changes nothing (a window
    that holds one is skipped by the optimizer), unless ``error_if_nonfinite`` makes it an error.
    ``foreach`` is accepted for PyTorch's signature: every norm here is one multi-tensor launch.
    """
    if not isinstance(grads, Gradients) and not (callable(getattr(grads, "grad_norm", None))
                                                 and callable(getattr(grads, "scale_window", None))):
        _refuse(grads)
    if isinstance(max_norm, bool) or not isinstance(max_norm, int | float | np.number) or not max_norm > 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be a positive number, got {max_norm!r}")
    if norm_type != 2:
        raise ValueError(f"clip_grad_norm_: only the L2 norm (norm_type=2) is offered, got norm_type={norm_type!r}")
    total = _total_norm(grads)
    if not math.isfinite(total):
        if error_if_nonfinite:
            raise RuntimeError(f"clip_grad_norm_: the gradients' L2 norm is {total}, so they cannot be clipped "
                               "(pass error_if_nonfinite=False to leave them as they are)")
    else:
        coef = float(max_norm) / (total + _EPS)
        if coef < 1.0:
            if isinstance(grads, Gradients):
                for array in grads.values():
                    array *= array.dtype.type(coef)
            else:
                grads.scale_window(coef)
    return Tensor(np.array(total, dtype=np.float64))

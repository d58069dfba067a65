"""Clipping by global L2 norm, computed by one multi-tensor norm kernel."""

from __future__ import annotations

import math
from typing import Protocol

from minitorch_accum import kernels
from minitorch_accum.autodiff import Gradients
from minitorch_accum.kernels.arrays import Array

__all__ = ["ClippableWindow", "clip_grad_norm", "grad_norm"]


class ClippableWindow(Protocol):
    """What an accumulator offers clipping: the norm of its normalized window, and a factor folded
    into the window's scale."""

    def grad_norm(self) -> float: ...

    def scale_window(self, factor: float) -> None: ...


def grad_norm(grads: Gradients | ClippableWindow) -> float:
    """The global L2 norm of all gradients (of the normalized window for an Accumulator)."""
    if isinstance(grads, Gradients):
        return _norm_of(list(grads.values()))
    measure = getattr(grads, "grad_norm", None)
    if callable(measure):
        return float(measure())
    raise TypeError(f"grad_norm expects a Gradients container or an Accumulator, got {type(grads).__name__}")


def _norm_of(arrays: list[Array]) -> float:
    by_device: dict[str, list[Array]] = {}
    for a in arrays:
        by_device.setdefault(getattr(a, "device", "cpu").__repr__(), []).append(a)
    # hypot, not a sum of squares: a float64 norm above 1e154 would overflow when squared
    return math.hypot(*(kernels.multi_l2_norm(group) for group in by_device.values()))


def clip_grad_norm(grads: Gradients | ClippableWindow, max_norm: float, eps: float = 1e-6) -> float:
    """Scale gradients so their global L2 norm is at most ``max_norm``; return the norm
    measured before clipping.

    A Gradients container is scaled in place. An Accumulator folds the factor into
    its window scale instead, so clipping costs no pass over the gradients.
    A non-finite norm leaves everything unchanged (the step should be skipped).
    """
    if not max_norm > 0:
        raise ValueError(f"clip_grad_norm: max_norm must be positive, got {max_norm!r}")
    total = grad_norm(grads)
    if not math.isfinite(total):
        return total
    coef = max_norm / (total + eps)
    if coef >= 1.0:
        return total
    if isinstance(grads, Gradients):
        for grad in grads.values():
            grad *= grad.dtype.type(coef)
    else:
        grads.scale_window(coef)
    return total

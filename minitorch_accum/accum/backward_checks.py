"""What ``Accumulator.backward`` checks before a micro-batch may enter the window, in order: the
window is whole, open and not full; the loss is one element; ``num_items`` is given where the
normalization needs it, a non-negative int; and a loss that is already a mean is not given to
an ``"items"`` window. Each failure is an error that names what was wrong; nothing is written."""

from __future__ import annotations

import numpy as np

from minitorch_accum.accum.loss_check import check_not_mean
from minitorch_accum.accum.window import Window
from minitorch_accum.autodiff import Tensor

__all__ = ["check_backward", "check_whole"]


def check_whole(what: str, poisoned: bool) -> None:
    """RuntimeError when a backward of this window failed halfway (the store is ``poisoned``)."""
    if poisoned:
        raise RuntimeError(f"{what}: a backward() of this window failed halfway, so its gradients are not "
                           "sums of whole micro-batches; call acc.zero() to discard the window")


def check_backward(window: Window, steps: int, reduction: str, poisoned: bool, loss: object, num_items: object,
                   allow_mean_loss: bool) -> None:
    """Everything ``backward(loss, num_items)`` needs of the window, the loss and the count."""
    check_whole("backward", poisoned)
    if window.closed:
        raise RuntimeError("backward: this window was closed by grads()/an optimizer step; call acc.zero() first")
    if window.micro_batches >= steps:
        raise RuntimeError(f"backward: the window already holds steps={steps} micro-batches; "
                           "step the optimizer and call acc.zero()")
    if not isinstance(loss, Tensor) or loss.size != 1:
        raise ValueError(f"backward: loss must be a one-element Tensor, got "
                         f"{type(loss).__name__}{getattr(loss, 'shape', '')}")
    if num_items is None:
        if reduction == "items":
            raise ValueError("backward: reduction='items' needs num_items= (how many items the summed loss "
                             "covers); use reduction='mean' for losses that are already means")
    elif isinstance(num_items, bool) or not isinstance(num_items, int | np.integer) or num_items < 0:
        raise ValueError(f"backward: num_items must be a non-negative int, got {num_items!r}")
    elif reduction == "items" and not allow_mean_loss:
        check_not_mean(loss, int(num_items))

"""How a window's summed gradient is normalized.

The accumulator always sums raw micro-batch gradients; the normalization is one
factor applied at the end of the window (and folded into the optimizer's fused step):

- ``"sum"``: no division;
- ``"mean"``: divide by the number of micro-batches really accumulated. Right only
  when each micro-batch loss is a mean over the same number of items;
- ``"items"``: each micro-batch passes a *summed* loss and its ``num_items``; divide
  by the total items of the window. Exact for micro-batches of any sizes (a mean
  per micro-batch, then a mean of means, is the 2024 Hugging Face accumulation bug).
"""

from __future__ import annotations

__all__ = ["REDUCTIONS", "WINDOW_REDUCTIONS", "check_reduction", "window_scale"]

#: how a window's summed gradient may be normalized (not how a loss reduces its items: that is
#: ``minitorch_accum.nn.functional.LOSS_REDUCTIONS``)
WINDOW_REDUCTIONS = ("mean", "sum", "items")
REDUCTIONS = WINDOW_REDUCTIONS  # its name before it said which


def check_reduction(reduction: str) -> str:
    """``reduction`` if it is one of ``WINDOW_REDUCTIONS``; a ValueError listing them otherwise."""
    if reduction not in WINDOW_REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(WINDOW_REDUCTIONS)}, got {reduction!r}")
    return reduction


def window_scale(reduction: str, micro_batches: int, items: int) -> float:
    """The factor that turns the window's summed gradient into its gradient."""
    if micro_batches <= 0:
        raise RuntimeError("the window is empty: call backward() for at least one micro-batch first")
    if reduction == "sum":
        return 1.0
    if reduction == "mean":
        return 1.0 / micro_batches
    if items <= 0:
        raise RuntimeError("reduction='items': the window holds 0 items, so it has no mean gradient")
    return 1.0 / items

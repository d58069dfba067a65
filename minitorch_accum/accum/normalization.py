"""How a window's summed gradient is normalized.

The accumulator always sums raw micro-batch gradients; the normalization is one
factor applied at the end of the window (and folded into the optimizer's fused step):

- ``"sum"``: no division;
- ``"mean"``: divide by the number of micro-batches really accumulated. Right only
  when each micro-batch loss is a mean over the same number of items;
- ``"items"``: each micro-batch passes a *summed* loss and its ``num_items``; divide
  by the total items of the window. Exact for micro-batches of any sizes (a mean
  per micro-batch, then a mean of means, is the 2024 Hugging Face accumulation bug);
- ``"mean_nominal"``: each micro-batch passes a mean loss, and the window is divided by
  the *configured* k (times the ranks), even when it holds fewer micro-batches. This is
  PyTorch Lightning's rule (each loss divided by ``accumulate_grad_batches``) and the
  Hugging Face Trainer's before its 2024 fix (each loss divided by
  ``gradient_accumulation_steps``): it reproduces those systems exactly, a partial last
  window included (whose gradient it makes smaller by held/k).
"""

from __future__ import annotations

__all__ = ["MEAN_LOSS_REDUCTIONS", "REDUCTIONS", "WINDOW_REDUCTIONS", "check_reduction",
           "micro_batch_loss_reduction", "window_scale"]

#: how a window's summed gradient may be normalized (not how a loss reduces its items: that is
#: ``minitorch_accum.nn.functional.LOSS_REDUCTIONS``)
WINDOW_REDUCTIONS = ("mean", "sum", "items", "mean_nominal")
REDUCTIONS = WINDOW_REDUCTIONS  # its name before it said which
#: the window reductions whose micro-batch losses are means over their items (the others take sums)
MEAN_LOSS_REDUCTIONS = ("mean", "mean_nominal")


def check_reduction(reduction: str) -> str:
    """``reduction`` if it is one of ``WINDOW_REDUCTIONS``; a ValueError listing them otherwise."""
    if reduction not in WINDOW_REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(WINDOW_REDUCTIONS)}, got {reduction!r}")
    return reduction


def micro_batch_loss_reduction(reduction: str) -> str:
    """How each micro-batch's loss must reduce its items for this window reduction:
    ``"mean"`` for ``mean`` and ``mean_nominal``, ``"sum"`` for ``items`` and ``sum``."""
    return "mean" if check_reduction(reduction) in MEAN_LOSS_REDUCTIONS else "sum"


def window_scale(reduction: str, micro_batches: int, items: int, nominal: int | None = None) -> float:
    """The factor that turns the window's summed gradient into its gradient.

    ``nominal`` is the configured number of micro-batches per window (k, times the ranks when
    data-parallel); ``"mean_nominal"`` divides by it, whatever the window holds."""
    if micro_batches <= 0:
        raise RuntimeError("the window is empty: call backward() for at least one micro-batch first")
    if reduction == "sum":
        return 1.0
    if reduction == "mean":
        return 1.0 / micro_batches
    if reduction == "mean_nominal":
        if nominal is None or nominal <= 0:
            raise ValueError("reduction='mean_nominal' needs nominal= (the configured micro-batches per window)")
        return 1.0 / nominal
    if items <= 0:
        raise RuntimeError("reduction='items': the window holds 0 items, so it has no mean gradient")
    return 1.0 / items

"""A loss that is already a mean, handed to an ``"items"`` window: divided twice, so refused.

``reduction="items"`` sums each micro-batch's *summed* loss and divides the window by its
items once. A loss whose last op is a mean (``F.cross_entropy(..., reduction="mean")``,
``F.mse_loss`` by default, ``x.mean()``, ``x.sum() / n``) has been divided by its micro-batch
already: the window gradient would come out that many times too small, with no other sign.
The graph says so: the loss's node is a ``Mean``, or a ``Div`` of a ``Sum`` by a constant.

Not recognized: a mean written as a product (``x.sum() * (1 / n)``) or followed by another op
(``mean + penalty``); those pass as summed losses.
"""

from __future__ import annotations

from minitorch_accum import ops
from minitorch_accum.autodiff import Tensor
from minitorch_accum.autodiff.graph import Node

__all__ = ["MeanLossError", "check_not_mean", "mean_loss_divisor"]


class MeanLossError(ValueError):
    """A mean loss was given to a window that divides by its items itself."""


def mean_loss_divisor(loss: Tensor) -> tuple[str, float] | None:
    """(what the last op is, the count it divides by) when ``loss`` ends in a mean, else None."""
    node = loss.grad_fn
    if node is None or node.freed:
        return None
    if node.fn is ops.Mean:
        return f"mean over {node.ctx.count} elements{_of(node.inputs[0].node)}", float(node.ctx.count)
    if node.fn is ops.Div and len(node.inputs) == 2:
        numerator, divisor = node.inputs
        if divisor.requires_grad or numerator.node is None or numerator.node.fn is not ops.Sum:
            return None
        saved = node.ctx.saved
        count = float(saved[1].reshape(-1)[0]) if len(saved) == 2 and saved[1].size == 1 else float("nan")
        return f"a sum{_of(numerator.node.inputs[0].node)} divided by {count:g}", count
    return None


def _of(node: Node | None) -> str:
    return "" if node is None else f" of {node.fn.op_name()}"


def check_not_mean(loss: Tensor, num_items: int) -> None:
    """MeanLossError naming the loss's last op and the window's reduction when ``loss`` is a mean."""
    found = mean_loss_divisor(loss)
    if found is None:
        return
    what, count = found
    raise MeanLossError(
        f"backward: the loss is already a mean (its last op is {what}), and this window's reduction is "
        f"'items' with num_items={num_items}: the window divides the summed gradient by its items itself, so "
        f"the gradient would come out {count:g} times too small. Give the micro-batch's summed loss "
        "(F.cross_entropy(..., reduction='sum'), F.mse_loss(..., reduction='sum')), or make the window "
        "Accumulator(reduction='mean') for mean losses; pass allow_mean_loss=True if the division is on purpose")

"""The property a comparison with the big batch sees only through the check's own count: ``loss_fn``'s
item count is the number of items its summed loss really holds.

A window is normalized by the items ``loss_fn`` counts, and so is the big batch: a count that is
wrong the same way on both sides (Hugging Face's count of the labels before the causal shift,
transformers PR #46204: every row's first label counted, never a target) leaves them equal and
scales every gradient by a factor that changes from step to step (``CheckContext`` divides its big
batch by the items it counts itself, so the comparisons fail too; this property names the count).
The count is read against the loss itself: the gradient of the summed loss with respect to the
model's output is nonzero exactly where an item sits, so the items are the output positions (every
axis but the last) that gradient reaches, or its elements (a loss per element), or the rows (a loss
per sequence).
"""

from __future__ import annotations

import numpy as np

from minitorch_accum.autodiff import Tensor, no_grad, tensor
from minitorch_accum.testing.check_context import CheckContext, parts_of
from minitorch_accum.testing.parameter_bound import Tolerance
from minitorch_accum.testing.property_results import SKIPPED, PropertyResult

__all__ = ["COUNT", "compare_item_count", "item_count_matches_the_loss", "items_in_gradient"]

#: the name the count is reported under, in place of a parameter's
COUNT = "loss_fn's item count"
_EXACT = Tolerance({COUNT: np.zeros(())}, "exact: an item count is an integer, and the loss's items are counted off "
                                          "the gradient it sends to the model's output")


def items_in_gradient(gradient: np.ndarray, rows: int) -> dict[str, int]:
    """What an item may be, counted where the gradient of a summed loss with respect to the model's
    output (rows along axis 0) is nonzero: output positions, output elements, rows."""
    reached = np.asarray(gradient) != 0
    if reached.ndim < 2:
        return {"output elements": int(reached.sum()), "rows": int(reached.reshape(rows, -1).any(axis=1).sum())}
    return {"output positions": int(reached.reshape(-1, reached.shape[-1]).any(axis=1).sum()),
            "output elements": int(reached.sum()),
            "rows": int(reached.reshape(rows, -1).any(axis=1).sum())}


def compare_item_count(result: PropertyResult, count: int, gradient: np.ndarray, rows: int, where: str) -> None:
    """Fold one batch's count into ``result``: passed when it is one of the items the gradient shows."""
    found = items_in_gradient(gradient, rows)
    nearest = count if count in found.values() else next(iter(found.values()))
    shown = ", ".join(f"{n} {kind}" for kind, n in found.items())
    result.compare({COUNT: np.asarray(float(count))}, {COUNT: np.asarray(float(nearest))}, _EXACT,
                   f"{where}: loss_fn counted {count} items, its summed loss reaches {shown}")


def item_count_matches_the_loss(ctx: CheckContext) -> PropertyResult:
    """The whole batch and each micro-batch of the longest split: ``loss_fn``'s count equals the output
    positions (or elements, or rows) its summed loss depends on. Inconclusive where the other properties
    are (``ctx.inexact()``): rows that interact give a micro-batch a loss of its own (an in-batch
    contrastive loss over one row is constant), and a loss with no gradient shows no items at all."""
    result = PropertyResult("item_count_matches_the_loss",
                            "loss_fn counts as items what its summed loss sums: the output positions it reaches")
    subject = ctx.subject
    model = subject.build()
    bounds = [slice(0, subject.rows), *parts_of(ctx.longest_split())]
    for rows in bounds:
        _, count = subject.loss(model, rows)  # the count, checked as every property checks it
        with no_grad():
            output = model(*subject.inputs(rows))
        if not isinstance(output, Tensor):
            result.status = SKIPPED
            result.notes.append(f"the model returns a {type(output).__name__}, not one tensor: the items cannot be "
                                "read off its gradient")
            return result
        leaf = tensor(output.numpy(), requires_grad=True)
        loss, _ = subject.loss_fn(leaf, subject.targets(rows))
        grads = loss.backward()
        gradient = np.asarray(grads[leaf]) if leaf in grads else np.zeros(leaf.shape)
        compare_item_count(result, count, gradient, rows.stop - rows.start, f"rows {rows.start}:{rows.stop}")
    return result.settle(ctx.inexact())

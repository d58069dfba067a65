"""``check_module``: a torch Module's window gradient against the big batch's, within the rounding
bound of ``parameter_bound.py`` (its per-row gradients from ``torch.func``), and its loss's item count.

    def loss_fn(output, targets):                  # the summed loss and its item count
        return F.cross_entropy(output, targets, reduction="sum"), int((targets != -100).sum())

    check_module(make_model, loss_fn, (x, y))      # raises AccumulationMismatch naming the split

The window is what PyTorch's own accumulation gives: ``backward()`` of each micro-batch's summed
loss into ``.grad``, divided once by the window's items; the big batch is one backward over every
row. ``make_model()`` is called with torch's generator seeded with 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minitorch_accum.testing.check_context import check_splits, parts_of
from minitorch_accum.testing.equivalence import AccumulationReport, default_splits
from minitorch_accum.testing.item_count import compare_item_count
from minitorch_accum.testing.parameter_bound import RowMagnitudes, Tolerance, parameter_walk_bound
from minitorch_accum.testing.property_results import AccumulationMismatch, PropertyResult
from minitorch_accum.testing.torch.loop import require_torch, torch_inexact_layers

__all__ = ["check_module", "row_magnitudes"]

#: ``loss_fn(output, targets) -> (summed loss, item count)``
TorchLossFn = Callable[[Any, Any], tuple[Any, int]]


class _TorchSubject:
    """The model factory, the loss and the batch ``(inputs, targets)``, rows along axis 0."""

    def __init__(self, model_factory: Callable[[], Any], loss_fn: TorchLossFn, batch: Any) -> None:
        self.torch = require_torch()
        if not callable(model_factory) or not callable(loss_fn):
            raise TypeError("check_module(model_factory, loss_fn, batch): model_factory and loss_fn must be functions")
        if not isinstance(batch, tuple | list) or len(batch) != 2:
            raise TypeError("batch must be a pair (inputs, targets) with rows along axis 0")
        self.model_factory, self.loss_fn = model_factory, loss_fn
        inputs = batch[0] if isinstance(batch[0], tuple) else (batch[0],)
        self.inputs, self.targets = tuple(inputs), batch[1]
        rows = {len(part) for part in (*self.inputs, self.targets)}
        if len(rows) != 1:
            raise ValueError(f"batch: inputs and targets hold different numbers of rows {sorted(rows)}")
        self.rows = rows.pop()

    def build(self) -> Any:
        self.torch.manual_seed(0)
        model = self.model_factory()
        if not isinstance(model, self.torch.nn.Module):
            raise TypeError(f"model_factory must return a torch.nn.Module, got {type(model).__name__}")
        return model

    def loss(self, model: Any, rows: slice, output: Any = None) -> tuple[Any, int]:
        if output is None:
            output = model(*(part[rows] for part in self.inputs))
        result = self.loss_fn(output, self.targets[rows])
        if not isinstance(result, tuple) or len(result) != 2:
            raise TypeError("loss_fn must return (summed loss, item count), got "
                            f"{type(result).__name__}; e.g. return F.cross_entropy(out, y, reduction='sum'), len(y)")
        loss, items = result
        items = int(items.item()) if isinstance(items, self.torch.Tensor) else items
        if isinstance(items, bool) or not isinstance(items, int | np.integer) or items < 0:
            raise TypeError(f"loss_fn's item count must be a non-negative int, got {items!r}")
        return loss, int(items)

    def window_gradient(self, model: Any, sizes: Sequence[int]) -> dict[str, np.ndarray]:
        """PyTorch's accumulation: each micro-batch's summed loss backpropagated into ``.grad``, divided
        once by the window's items."""
        model.zero_grad(set_to_none=True)
        items = 0
        for rows in parts_of(sizes):
            loss, count = self.loss(model, rows)
            loss.backward()
            items += count
        scale = 1.0 / max(items, 1)
        return {name: (p.grad.detach().to("cpu", self.torch.float64).numpy() * scale if p.grad is not None
                       else np.zeros(tuple(p.shape))) for name, p in model.named_parameters()}


def row_magnitudes(subject: _TorchSubject, model: Any) -> RowMagnitudes:
    """sum_r |g_r| and |sum_r g_r| per parameter from per-row gradients: ``torch.func.vmap(grad(...))``,
    or one backward per row when the loss cannot be vmapped (an item count read with ``int()``)."""
    torch = subject.torch
    named = dict(model.named_parameters())
    try:
        per_row = _vmapped_row_gradients(subject, model)
    except Exception:  # any loss vmap cannot trace (an int() of a tensor) falls back to the plain loop
        per_row = {name: [] for name in named}
        for r in range(subject.rows):
            model.zero_grad(set_to_none=True)
            loss, _ = subject.loss(model, slice(r, r + 1))
            loss.backward()
            for name, p in named.items():
                per_row[name].append(p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
        per_row = {name: torch.stack(grads) for name, grads in per_row.items()}
    _, items = subject.loss(model, slice(0, subject.rows))
    as_array = {name: g.detach().to("cpu", torch.float64).numpy() for name, g in per_row.items()}
    fan = sum(max(p.shape) if p.dim() else 1 for p in named.values())  # any dimension may be the fan-in: the largest
    return RowMagnitudes({n: np.abs(g).sum(axis=0) for n, g in as_array.items()},
                         {n: np.abs(g.sum(axis=0)) for n, g in as_array.items()}, items, subject.rows, fan)


def _vmapped_row_gradients(subject: _TorchSubject, model: Any) -> dict[str, Any]:
    from torch.func import functional_call, grad, vmap

    params = {name: p.detach() for name, p in model.named_parameters()}
    buffers = dict(model.named_buffers())
    count = len(subject.inputs)

    def row_loss(weights: dict[str, Any], *row: Any) -> Any:
        inputs = tuple(part.unsqueeze(0) for part in row[:count])
        output = functional_call(model, (weights, buffers), inputs)
        return subject.loss_fn(output, row[count].unsqueeze(0))[0]

    return vmap(grad(row_loss), in_dims=(None, *([0] * (count + 1))))(params, *subject.inputs, subject.targets)


def _window_property(subject: _TorchSubject, splits: tuple[tuple[int, ...], ...]) -> PropertyResult:
    result = PropertyResult("window_equals_full_batch", "the window's gradient (micro-batches accumulated in .grad) "
                                                        "equals the big batch's, for any split")
    model = subject.build()
    inexact = torch_inexact_layers(model)
    expected = subject.window_gradient(model, (subject.rows,))
    magnitudes = None if inexact else row_magnitudes(subject, model)
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    for sizes in splits:
        if magnitudes is None:
            tolerance = Tolerance({n: np.zeros(()) for n in expected}, "none: the model is not expected to match")
        else:
            tolerance = parameter_walk_bound(magnitudes, len(sizes), dtype)
        result.compare(subject.window_gradient(model, sizes), expected, tolerance, f"split {sizes}")
    return result.settle(inexact)


def _item_count_property(subject: _TorchSubject, splits: tuple[tuple[int, ...], ...]) -> PropertyResult:
    result = PropertyResult("item_count_matches_the_loss",
                            "loss_fn counts as items what its summed loss sums: the output positions it reaches")
    torch = subject.torch
    model = subject.build()
    longest = max(splits, key=len)
    for rows in (slice(0, subject.rows), *parts_of(longest)):
        with torch.no_grad():
            output = model(*(part[rows] for part in subject.inputs))
        output = output.detach().requires_grad_(True)
        loss, count = subject.loss(model, rows, output)
        (gradient,) = torch.autograd.grad(loss, output, allow_unused=True, materialize_grads=True)
        compare_item_count(result, count, gradient.detach().to("cpu", torch.float64).numpy(), rows.stop - rows.start,
                           f"rows {rows.start}:{rows.stop}")
    return result.settle(torch_inexact_layers(model))  # a micro-batch of a batch whose rows interact has its own loss


def check_module(model_factory: Callable[[], Any], loss_fn: TorchLossFn, batch: Any, *,
                 splits: Sequence[int] | Sequence[Sequence[int]] | None = None,
                 raise_on_failure: bool = True) -> AccumulationReport:
    """Check that accumulating ``batch`` over each split in ``.grad`` gives the big batch's gradient, and
    that ``loss_fn`` counts its items (see the module docstring). Raises ``AccumulationMismatch`` for the
    first failed property unless ``raise_on_failure`` is False."""
    subject = _TorchSubject(model_factory, loss_fn, batch)
    chosen = check_splits(splits, subject.rows) if splits is not None else default_splits(subject.rows)
    results = [_window_property(subject, chosen), _item_count_property(subject, chosen)]
    dtype = str(next(subject.build().parameters()).dtype).removeprefix("torch.")
    report = AccumulationReport(results, chosen, dtype, list(dict.fromkeys(n for r in results for n in r.notes)))
    if raise_on_failure and report.failures:
        error = AccumulationMismatch(report.failures[0])
        if len(report.failures) > 1:
            error.add_note("also failed: " + "; ".join(r.summary() for r in report.failures[1:]))
        raise error
    return report

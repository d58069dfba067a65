"""What the equivalence checks run on: the user's model (built fresh by a factory), loss and batch.

    def loss_fn(output, targets):                      # the loss contract
        loss = F.cross_entropy(output, targets, reduction="sum", ignore_index=-100)
        return loss, F.count_items(targets)            # a summed loss, and how many items it sums

``loss_fn(output, targets)`` receives the model's output for some rows of the batch and
those rows' targets, and returns the loss *summed* over the items it covers together with
their number (an int). An item is whatever the loss averages over: a sample, or a token of
a padded sequence (positions equal to ``ignore_index`` are not items), so sequence models
with padding are normalized right. ``batch`` is ``(inputs, targets)`` with rows along axis 0;
float inputs become tensors of the subject's dtype, integer inputs (token ids) are passed as
they are, and a tuple of inputs is passed as ``model(*inputs)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor, tensor
from minitorch_accum.nn import BatchNorm1d, Dropout, Module

__all__ = ["LossFn", "Rows", "Subject", "inexact_layers"]

#: ``loss_fn(output, targets) -> (summed loss, item count)``
LossFn = Callable[[Any, Any], tuple[Tensor, int]]
#: which rows of the batch: a slice or an index array
Rows = slice | np.ndarray


def inexact_layers(model: Module, random_only: bool = False) -> list[str]:
    """Why accumulation cannot equal the big batch for ``model`` in its current mode, one reason per
    layer: training-mode BatchNorm (statistics per micro-batch) and active dropout (masks drawn per
    micro-batch, not shared with the big batch). ``random_only``: dropout alone (what makes a
    window differ from a rerun of itself)."""
    reasons = []
    for name, module in model.named_modules():
        where = f"layer {name} ({type(module).__name__})" if name else type(module).__name__
        if isinstance(module, BatchNorm1d) and module.training and not random_only:
            reasons.append(f"{where}: BatchNorm in training mode normalizes each micro-batch by its own "
                           "statistics, so an item's output depends on the micro-batch it is in")
        elif isinstance(module, Dropout) and module.training and float(getattr(module, "p", 0.0)) > 0:
            reasons.append(f"{where}: dropout (p={module.p}) draws its masks per micro-batch, so the window "
                           "and the big batch drop different units")
    return reasons


@dataclass(frozen=True)
class Subject:
    """A model factory, a loss (see the module docstring) and one batch, in one dtype."""

    model_factory: Callable[[], Module]
    loss_fn: LossFn
    batch: tuple[Any, Any]
    dtype: str = "float64"

    def __post_init__(self) -> None:
        if not callable(self.model_factory):
            raise TypeError(f"model_factory must be a function returning a Module, got "
                            f"{type(self.model_factory).__name__}")
        if not callable(self.loss_fn):
            raise TypeError(f"loss_fn must be a function (output, targets) -> (summed loss, items), got "
                            f"{type(self.loss_fn).__name__}")
        if not isinstance(self.batch, tuple | list) or len(self.batch) != 2:
            raise TypeError("batch must be a pair (inputs, targets) with rows along axis 0")
        rows = {len(part) for part in self._inputs_tuple()} | {len(self.batch[1])}
        if len(rows) != 1:
            raise ValueError(f"batch: inputs and targets hold different numbers of rows {sorted(rows)}")

    def _inputs_tuple(self) -> tuple[Any, ...]:
        inputs = self.batch[0]
        return tuple(inputs) if isinstance(inputs, tuple) else (inputs,)

    def shapes(self) -> list[tuple[int, ...]]:
        """The shapes of the batch's arrays: the inputs', then the targets'."""
        return [tuple(np.shape(a)) for a in (*self._inputs_tuple(), self.batch[1])]

    @property
    def rows(self) -> int:
        """Rows of the batch (what splits cut into micro-batches)."""
        return len(self.batch[1])

    def build(self) -> Module:
        """A fresh model from the factory, cast to the subject's dtype."""
        model = self.model_factory()
        if not isinstance(model, Module):
            raise TypeError(f"model_factory must return a Module, got {type(model).__name__}")
        return model.to(dtype=self.dtype)

    def build_identical(self, count: int = 2) -> list[Module]:
        """``count`` fresh models, checked to hold the same parameters (the comparison means nothing
        otherwise)."""
        models = [self.build() for _ in range(count)]
        first = models[0].to_record()
        for other in models[1:]:
            record = other.to_record()
            differ = sorted(n for n in first if n not in record or not np.array_equal(first[n], record[n]))
            if differ or set(record) != set(first):
                raise ValueError("model_factory built two different models (parameters "
                                 f"{', '.join(differ) or 'by name'} differ): seed it inside the factory, e.g. "
                                 "mta.manual_seed(0) before building the layers")
        return models

    def inputs(self, rows: Rows) -> tuple[Any, ...]:
        """The model's arguments for ``rows``: float arrays as tensors of the subject's dtype."""
        arguments = []
        for part in self._inputs_tuple():
            picked = part[rows]
            if isinstance(picked, np.ndarray) and picked.dtype.kind == "f":
                picked = tensor(picked, dtype=self.dtype)
            arguments.append(picked)
        return tuple(arguments)

    def targets(self, rows: Rows) -> Any:
        return self.batch[1][rows]

    def loss(self, model: Module, rows: Rows) -> tuple[Tensor, int]:
        """The summed loss of ``rows`` and its item count, as ``loss_fn`` returns them (checked)."""
        result = self.loss_fn(model(*self.inputs(rows)), self.targets(rows))
        if not isinstance(result, tuple) or len(result) != 2:
            raise TypeError("loss_fn must return (summed loss, item count), got "
                            f"{type(result).__name__}; e.g. return F.cross_entropy(out, y, reduction='sum'), "
                            "F.count_items(y)")
        loss, items = result
        if not isinstance(loss, Tensor) or loss.size != 1:
            raise TypeError(f"loss_fn's loss must be a one-element Tensor, got {type(loss).__name__}")
        if isinstance(items, bool) or not isinstance(items, int | np.integer) or items < 0:
            raise TypeError(f"loss_fn's item count must be a non-negative int, got {items!r}")
        return loss, int(items)

    def reference_gradient(self, model: Module, rows: Rows | None = None,
                           reduction: str = "items") -> dict[str, np.ndarray]:
        """The gradient of one plain backward over ``rows`` (all of them by default), no accumulator:
        summed loss / items (``"sum"``: the summed loss), by parameter name, in float64."""
        loss, items = self.loss(model, slice(None) if rows is None else rows)
        grads = loss.backward()
        scale = 1.0 if reduction == "sum" else 1.0 / max(items, 1)
        return {name: np.asarray(grads[p], dtype=np.float64) * scale if p in grads
                else np.zeros(p.shape) for name, p in model.named_parameters()}

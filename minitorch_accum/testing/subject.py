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

The subject owns the seed: every model is built with the library's generator seeded by
``seed`` (the caller's stream given back after), so an unseeded factory builds equal models,
and every forward draws its dropout masks keyed to the batch's items (``item_keyed_draws``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor, tensor
from minitorch_accum.backend import resolve_dtype
from minitorch_accum.backend.random import fork_rng
from minitorch_accum.nn import BatchNorm1d, Dropout, Module
from minitorch_accum.testing.item_keyed_draws import keyed_draws

__all__ = ["LossFn", "Rows", "Subject", "check_dtype", "inexact_layers"]

#: ``loss_fn(output, targets) -> (summed loss, item count)``
LossFn = Callable[[Any, Any], tuple[Tensor, int]]
#: which rows of the batch: a slice or an index array
Rows = slice | np.ndarray


def check_dtype(dtype: Any, what: str = "dtype") -> str:
    """A float dtype's name ("float32") from a name, a NumPy dtype or scalar type, or ``mta.float32``."""
    try:
        return resolve_dtype(dtype).name
    except TypeError:
        raise TypeError(f"{what}: {dtype!r} is not a float dtype; give one of float64, float32, float16, bfloat16 "
                        "(a name, np.float32, or mta.float32)") from None


def inexact_layers(model: Module, random_only: bool = False, keyed_dropout: bool = False) -> list[str]:
    """Why accumulation cannot equal the big batch for ``model`` in its current mode, one reason per
    layer: training-mode BatchNorm (statistics per micro-batch) and active dropout (masks drawn per
    micro-batch, not shared with the big batch). ``random_only``: dropout alone (what makes a
    window differ from a rerun of itself); ``keyed_dropout``: the masks follow the items (as the
    checks draw them), so dropout is no reason."""
    reasons = []
    for name, module in model.named_modules():
        where = f"layer {name} ({type(module).__name__})" if name else type(module).__name__
        if isinstance(module, BatchNorm1d) and module.training and not random_only:
            reasons.append(f"{where}: BatchNorm in training mode normalizes each micro-batch by its own "
                           "statistics, so an item's output depends on the micro-batch it is in")
        elif (isinstance(module, Dropout) and module.training and float(getattr(module, "p", 0.0)) > 0
              and not keyed_dropout):
            reasons.append(f"{where}: dropout (p={module.p}) draws its masks per micro-batch, so the window "
                           "and the big batch drop different units")
    return reasons


def _rows_of(part: Any, what: str) -> int:
    try:
        return len(part)
    except TypeError:
        raise TypeError(f"batch: {what} is {type(part).__name__} {part!r}, not an array with rows along axis "
                        "0") from None


@dataclass(frozen=True)
class Subject:
    """A model factory, a loss (see the module docstring) and one batch, in one dtype; ``seed`` seeds
    every model built and every dropout mask; ``evaluation_mode`` builds the models in ``eval()``;
    ``keyed``: the forward's random draws follow the items (``item_keyed_draws``)."""

    model_factory: Callable[[], Module]
    loss_fn: LossFn
    batch: tuple[Any, Any]
    dtype: str = "float64"
    seed: int = 0
    evaluation_mode: bool = False
    keyed: bool = True  # dropout masks keyed to the items (off when the forward's draws cannot be)

    def __post_init__(self) -> None:
        if isinstance(self.model_factory, Module):
            name = type(self.model_factory).__name__
            raise TypeError(f"model_factory: got a {name} instance, not a function that builds one; every property "
                            f"builds fresh models, so pass the class or a function: {name} or lambda: {name}(...)")
        if not callable(self.model_factory):
            raise TypeError(f"model_factory must be a function returning a Module, got "
                            f"{type(self.model_factory).__name__}")
        if not callable(self.loss_fn):
            raise TypeError(f"loss_fn must be a function (output, targets) -> (summed loss, items), got "
                            f"{type(self.loss_fn).__name__}")
        if isinstance(self.batch, dict):
            keys = ", ".join(repr(k) for k in self.batch)
            raise TypeError(f"batch: a dict ({keys}) is not a pair (inputs, targets); pass the arrays, e.g. "
                            "(batch['input_ids'], batch['labels'])")
        if not isinstance(self.batch, tuple | list) or len(self.batch) != 2:
            raise TypeError("batch must be a pair (inputs, targets) with rows along axis 0, got "
                            f"{type(self.batch).__name__}" + (f" of {len(self.batch)}" if isinstance(
                                self.batch, tuple | list) else ""))
        object.__setattr__(self, "dtype", check_dtype(self.dtype))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer):
            raise TypeError(f"seed must be an int, got {self.seed!r}")
        rows = {_rows_of(part, "an input") for part in self._inputs_tuple()} | {_rows_of(self.batch[1], "targets")}
        if len(rows) != 1:
            raise ValueError(f"batch: inputs and targets hold different numbers of rows {sorted(rows)}")
        held = rows.pop()
        if held < 2:
            raise ValueError(f"batch: it holds {held} row{'s' if held != 1 else ''} (shapes "
                             f"{self.shapes()}); a window needs at least 2 rows to be split into micro-batches "
                             "that differ from the big batch")

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

    def row_indices(self, rows: Rows) -> np.ndarray:
        """The batch's row numbers that ``rows`` picks."""
        if isinstance(rows, slice):
            return np.arange(*rows.indices(self.rows))
        return np.arange(self.rows)[np.asarray(rows)]

    def build(self) -> Module:
        """A fresh model from the factory (the library's generator seeded by ``seed`` around the call),
        cast to the subject's dtype; dropout layers draw from the default generator, keyed per item."""
        with fork_rng(int(self.seed)):
            model = self.model_factory()
        if not isinstance(model, Module):
            raise TypeError(f"model_factory must return a Module, got {type(model).__name__}")
        model.to(dtype=self.dtype)
        if self.evaluation_mode:
            model.eval()
        for module in model.modules():
            if isinstance(module, Dropout) and module.rng is not None:
                module.rng = None  # its own generator could not follow the items
        return model

    def native_dtype(self) -> str | None:
        """The dtype the factory builds the model's float parameters in (None when they mix several)."""
        with fork_rng(int(self.seed)):
            model = self.model_factory()
        if not isinstance(model, Module):
            raise TypeError(f"model_factory must return a Module, got {type(model).__name__}")
        kinds = {p.dtype.name for p in model.parameters()}
        return kinds.pop() if len(kinds) == 1 else None

    def build_identical(self, count: int = 2) -> list[Module]:
        """``count`` fresh models, checked to be distinct objects holding the same parameters (the
        comparison means nothing otherwise)."""
        models = [self.build() for _ in range(count)]
        first = models[0]
        for other in models[1:]:
            if other is first:
                raise ValueError(f"model_factory returned the same {type(first).__name__} object twice: every "
                                 "property compares freshly built models, and a model compared with itself always "
                                 "agrees; build a new one on each call (MyModel, or lambda: MyModel(), not "
                                 "lambda: model)")
            owned = {id(p): name for name, p in first.named_parameters()}
            shared = [owned[id(p)] for p in other.parameters() if id(p) in owned]
            if shared:
                raise ValueError(f"model_factory's models share parameter objects ({', '.join(shared[:4])}): "
                                 "a step on one moves the other; build new layers on each call")
        records = [m.to_record() for m in models]
        for record in records[1:]:
            self._same_architecture(records[0], record)
            differ = sorted(n for n in records[0] if not np.array_equal(records[0][n], record[n]))
            if differ:
                raise ValueError(
                    f"model_factory built two models whose parameters differ ({', '.join(differ[:4])}) although "
                    f"the check seeds minitorch_accum's generator (seed={self.seed}) before each call: the factory "
                    "draws from another source (NumPy's global generator, a Generator of its own, the clock); seed "
                    "that source inside the factory, or initialize from the library's generator")
        return models

    @staticmethod
    def _same_architecture(first: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> None:
        missing, extra = sorted(set(first) - set(other)), sorted(set(other) - set(first))
        shapes = [f"{n!r} is {first[n].shape} in one and {other[n].shape} in the other"
                  for n in first if n in other and first[n].shape != other[n].shape]
        if missing or extra or shapes:
            found = shapes + ([f"only one has {', '.join(missing + extra)}"] if missing or extra else [])
            raise ValueError(f"model_factory built two different architectures: {'; '.join(found[:4])}; it must "
                             "build the same model on every call (a factory whose width or layers depend on a "
                             "random draw or a counter cannot be checked)")

    def inputs(self, rows: Rows) -> tuple[Any, ...]:
        """The model's arguments for ``rows``: float arrays as tensors of the subject's dtype."""
        arguments = []
        for part in self._inputs_tuple():
            picked = part[rows]
            if isinstance(picked, Tensor) and picked.dtype.kind == "f":
                picked = picked.to(dtype=self.dtype)
            elif isinstance(picked, np.ndarray) and picked.dtype.kind == "f":
                picked = tensor(picked, dtype=self.dtype)
            arguments.append(picked)
        return tuple(arguments)

    def targets(self, rows: Rows) -> Any:
        return self.batch[1][rows]

    def _draws(self, rows: Rows) -> AbstractContextManager[Any]:
        return keyed_draws(int(self.seed), self.row_indices(rows)) if self.keyed else nullcontext()

    def output(self, model: Module, rows: Rows) -> Any:
        """The model's output for ``rows``, its dropout masks keyed to those rows."""
        with self._draws(rows):
            return model(*self.inputs(rows))

    def loss(self, model: Module, rows: Rows) -> tuple[Tensor, int]:
        """The summed loss of ``rows`` and its item count, as ``loss_fn`` returns them (checked)."""
        with self._draws(rows):
            result = self.loss_fn(model(*self.inputs(rows)), self.targets(rows))
        return self.checked_loss(result)

    @staticmethod
    def checked_loss(result: Any) -> tuple[Tensor, int]:
        """``loss_fn``'s result checked against the contract: a one-element Tensor and an int."""
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

    def reference_gradient(self, model: Module, rows: Rows | None = None, reduction: str = "items",
                           items: int | None = None) -> dict[str, np.ndarray]:
        """The gradient of one plain backward over ``rows`` (all of them by default), no accumulator:
        summed loss / items (``"sum"``: the summed loss), by parameter name, in float64. ``items``
        replaces ``loss_fn``'s count (the check's own count, when ``loss_fn`` miscounts)."""
        loss, counted = self.loss(model, slice(None) if rows is None else rows)
        grads = loss.backward()
        scale = 1.0 if reduction == "sum" else 1.0 / max(counted if items is None else items, 1)
        return {name: np.asarray(grads[p], dtype=np.float64) * scale if p in grads
                else np.zeros(p.shape) for name, p in model.named_parameters()}

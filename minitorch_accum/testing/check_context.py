"""What every property of one check shares: the subject, the recipe under test, the splits, and
what is measured once before any property runs (``CheckContext.__post_init__``):

- whether the forward is deterministic once its dropout masks follow the items (else the model
  runs in evaluation mode, and the report says so);
- every row's gradient, twice (the checked dtype and a second precision), which sizes the
  rounding bound (``parameter_bound.py``) and shows whether the rows interact: the sum of the
  rows' gradients must equal the whole batch's within that bound, or the loss is not a sum
  over items (BatchNorm, a centering over the batch, an in-batch contrastive loss...);
- the items, counted without ``loss_fn``: the output positions the loss depends on (the
  gradient of the loss with respect to the output is not 0 there); a ``loss_fn`` that counts
  padding or counts before the label shift is named, and the big batch is normalized by the
  items really there, so its mistake no longer cancels between the two sides;
- the big batch's gradient.

A model that cannot match the big batch by its nature makes the properties *inconclusive*
(``inexact``), with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn import Module
from minitorch_accum.testing.item_keyed_draws import UnkeyableDrawError
from minitorch_accum.testing.parameter_bound import (
    UNIT_ROUNDOFF,
    RowMagnitudes,
    Tolerance,
    Twin,
    parameter_walk_bound,
    relative_tolerance,
)
from minitorch_accum.testing.recipes import Recipe
from minitorch_accum.testing.subject import Rows, Subject, inexact_layers

__all__ = ["CheckContext", "ItemCount", "Window", "check_splits", "parts_of"]

_IGNORE_INDEX = -100


class Window(NamedTuple):
    """Micro-batch sizes and the Accumulator's k (more than ``len(sizes)``: a partial window)."""

    sizes: tuple[int, ...]
    steps: int


def parts_of(sizes: Sequence[int]) -> list[slice]:
    """The rows of each micro-batch of a split, in order."""
    bounds = np.cumsum((0, *sizes))
    return [slice(int(a), int(b)) for a, b in pairwise(bounds)]


def _is_int(n: Any) -> bool:
    return not isinstance(n, bool | np.bool_) and isinstance(n, int | np.integer)


def check_splits(splits: Any, rows: int) -> tuple[tuple[int, ...], ...]:
    """One split (sizes) or several, as a tuple of size tuples, each checked to cover ``rows``."""
    example = f"e.g. ({rows // 2}, {rows - rows // 2})"
    if isinstance(splits, np.ndarray):
        splits = splits.tolist()
    if _is_int(splits) or isinstance(splits, float | str) or not isinstance(splits, Sequence):
        raise TypeError(f"splits: give micro-batch sizes summing to the batch's {rows} rows, {example}, or a list "
                        f"of such tuples; got {type(splits).__name__} {splits!r}")
    if not len(splits):
        raise ValueError(f"splits: give at least one split, {example}")
    many = [splits] if all(isinstance(s, str) or not isinstance(s, Sequence | np.ndarray) for s in splits) \
        else list(splits)
    checked = []
    for sizes in many:
        if isinstance(sizes, np.ndarray):
            sizes = sizes.tolist()
        if not isinstance(sizes, Sequence) or isinstance(sizes, str):
            raise TypeError(f"splits: each split is a tuple of micro-batch sizes, got {sizes!r}")
        if not sizes:
            raise ValueError(f"splits: an empty split; {example}")
        for n in sizes:
            if not _is_int(n):
                kind = "a float" if isinstance(n, float | np.floating) else type(n).__name__
                raise TypeError(f"splits: micro-batch sizes must be ints, got {n!r} ({kind}) in {tuple(sizes)}")
            if n < 1:
                raise ValueError(f"splits: micro-batch sizes must be positive, got {n} in {tuple(sizes)}")
        if sum(sizes) != rows:
            raise ValueError(f"splits: {tuple(sizes)} covers {sum(sizes)} rows, the batch holds {rows}")
        checked.append(tuple(int(n) for n in sizes))
    return tuple(checked)


@dataclass(frozen=True)
class ItemCount:
    """How many items the loss covers over some rows, counted without ``loss_fn``: the output
    positions (every axis but the last) and elements where d loss / d output is not 0, and the
    rows holding any of them."""

    positions: int
    elements: int
    rows: int


@dataclass
class CheckContext:
    """One subject under one recipe, over ``splits``; ``rtol`` replaces the derived bound."""

    subject: Subject
    splits: tuple[tuple[int, ...], ...]
    recipe: Recipe = field(default_factory=Recipe)
    rtol: float | None = None
    world_size: int = 2
    epochs: int = 2
    #: what the check found before the properties ran (evaluation mode, miscounted items), for the report
    notes: list[str] = field(default_factory=list)
    _reference: dict[str, np.ndarray] | None = field(default=None, repr=False)
    _magnitudes: RowMagnitudes | None = field(default=None, repr=False)
    _inexact: dict[bool, list[str]] = field(default_factory=dict, repr=False)
    _own_items: bool = field(default=False, repr=False)
    _random: str = field(default="", repr=False)  # why the forward is random, if it is
    _twin_failure: str = field(default="", repr=False)
    _row_failure: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        self._probe_randomness()
        self._count_items()
        self._measure_rows()

    @property
    def reduction(self) -> str:
        """What the reference divides by: nothing for ``"sum"``, the items otherwise."""
        return "sum" if self.recipe.reduction == "sum" else "items"

    # ------------------------------------------------------------------ the probes
    def _probe_randomness(self) -> None:
        """Dropout masks follow the items; a draw that cannot (its first axis is not the rows) puts the
        model in evaluation mode; a forward still random after that is no comparison at all."""
        model = self.subject.build()
        draw = self._unkeyable(model)
        if draw is not None:
            self.subject = replace(self.subject, evaluation_mode=True)
            self.notes.append(f"{draw}: the check runs the model in evaluation mode (model.eval(), dropout off)")
            model = self.subject.build()
            again = self._unkeyable(model)
            if again is not None:
                self._random = f"the forward draws random numbers even in evaluation mode ({again})"
                self.subject = replace(self.subject, keyed=False)
                return
        first, _ = self.subject.loss(model, slice(None))
        second, _ = self.subject.loss(model, slice(None))
        a, b = float(first.numpy().reshape(-1)[0]), float(second.numpy().reshape(-1)[0])
        self._random = "" if a == b or (np.isnan(a) and np.isnan(b)) else (
            f"the forward is random in a way the check cannot tie to items: two forwards of the same rows give the "
            f"losses {a!r} and {b!r} (a generator of its own, or a draw other than random(): normal, integers...)")

    def _unkeyable(self, model: Module) -> UnkeyableDrawError | None:
        """The first draw that cannot follow the items in a forward over the first n rows, n = every size from
        the batch's down: a draw whose first axis is not the rows ((features, rows) after a transpose) can be a
        multiple of the whole batch's rows, and not of a micro-batch's."""
        for n in range(self.subject.rows, 0, -1):
            try:
                self.subject.loss(model, slice(0, n))
            except UnkeyableDrawError as draw:
                return draw
            except Exception:  # fewer rows that cannot run alone (BatchNorm's one row): measured later
                if n == self.subject.rows:
                    raise
        return None

    def _count_items(self) -> None:
        """Compare ``loss_fn``'s count with the items counted from the loss's dependence on the output."""
        if self.reduction == "sum":
            return
        model = self.subject.build()
        _, counted = self.subject.loss(model, slice(None))
        own = self.items_in(model, slice(None))
        if own is None:
            return
        accepted = {own.positions, own.elements, own.rows, self.subject.rows}
        if counted in accepted:
            return
        self._own_items = True
        self.notes.append(self._miscount(counted, own))

    def _miscount(self, counted: int, own: ItemCount) -> str:
        """Name what ``loss_fn``'s count got wrong."""
        targets = np.asarray(self.subject.batch[1])
        head = (f"loss_fn counts {counted} items in the batch, but the loss depends on {own.positions} positions of "
                "the output")
        if targets.dtype.kind in "iu":
            padding = int((targets == _IGNORE_INDEX).sum())
            if padding and counted == targets.size:
                return (f"{head}: it counts every target position, padding included ({padding} targets are "
                        f"ignore_index {_IGNORE_INDEX}); count the real ones, F.count_items(targets); the big batch "
                        f"is normalized here by the {own.positions} items really there")
            if targets.ndim >= 2 and counted - own.positions == int((targets[:, 0] != _IGNORE_INDEX).sum()):
                return (f"{head}, one fewer per row: the items are counted before the label shift (position 0's "
                        "label is never a target); count the shifted labels, F.count_items(targets[:, 1:]); the "
                        f"big batch is normalized here by the {own.positions} items really there")
        return (f"{head} ({own.elements} elements, {own.rows} rows): it divides by the wrong number; the big batch "
                f"is normalized here by the {own.positions} items really there")

    def items_in(self, model: Module, rows: Rows) -> ItemCount | None:
        """The items of ``rows`` counted without ``loss_fn``'s count (None when the model's output is not
        one tensor): the positions of the output that the loss depends on."""
        output = self.subject.output(model, rows)
        if not isinstance(output, Tensor):
            return None
        leaf = output.detach().requires_grad_()
        loss, _ = self.subject.checked_loss(self.subject.loss_fn(leaf, self.subject.targets(rows)))
        grads = loss.backward()
        if leaf not in grads:
            return ItemCount(0, 0, 0)
        depends = np.asarray(grads[leaf]) != 0
        by_position = depends.reshape(-1, depends.shape[-1]).any(axis=1) if depends.ndim >= 2 else depends
        rows_held = len(self.subject.row_indices(rows))
        by_row = depends.reshape(rows_held, -1).any(axis=1) if depends.shape[:1] == (rows_held,) else depends.any()
        return ItemCount(int(by_position.sum()), int(depends.sum()), int(np.sum(by_row)))

    def items(self, model: Module, rows: Rows | None = None) -> int | None:
        """The items the big batch over ``rows`` is normalized by: None for ``loss_fn``'s own count, the
        check's count when ``loss_fn`` miscounts."""
        if not self._own_items:
            return None
        counted = self.items_in(model, slice(None) if rows is None else rows)
        return None if counted is None else counted.positions

    def _measure_rows(self) -> None:
        """Every row's gradient in the checked dtype and in a second precision."""
        subject = self.subject
        model = subject.build()
        try:
            self._magnitudes = RowMagnitudes.measure(model, lambda rows: subject.loss(model, rows), subject.rows,
                                                     twin=self._twin(model))
        except Exception as error:  # a row that cannot run alone: the rows depend on each other
            self._row_failure = (f"the rows of the batch interact: a single row cannot run on its own "
                                 f"({type(error).__name__}: {error}), so the loss is not a sum over items")
            return
        self._magnitudes.noise_source = self._magnitudes.noise_source or self._twin_failure
        if self._own_items:
            own = self.items_in(model, slice(None))
            self._magnitudes.items = own.positions if own is not None else self._magnitudes.items
        if not all(np.all(np.isfinite(g)) for g in self._magnitudes.total.values()):
            self.notes.append("a row's gradient is not finite when the row is a micro-batch of its own; every "
                              "comparison with such a window fails")

    def _twin(self, model: Module, rows: np.ndarray | None = None) -> Twin | None:
        """``model`` in float64 (a float32 or 16-bit check: its error is the difference), or in float32 (a
        float64 check: the float32 error, scaled by u64 / u32, first-order error being linear in u); its
        ``row_loss`` over ``rows`` (batch row numbers; all of them by default)."""
        dtype = self.subject.dtype
        other = "float32" if dtype == "float64" else "float64"
        scale = UNIT_ROUNDOFF[dtype] / UNIT_ROUNDOFF[other] if dtype == "float64" else 1.0
        try:
            twin_subject = replace(self.subject, dtype=other)
            twin_model = twin_subject.build()
            twin_model.load_record(model.to_record())
        except Exception as error:  # a model that cannot be built in the other precision: no floor, said so
            self._twin_failure = f"no second evaluation in {other} ({type(error).__name__}: {error})"
            return None
        return Twin(twin_model, lambda part: twin_subject.loss(twin_model, part if rows is None else rows[part]),
                    other, scale)

    # ------------------------------------------------------------------ what the properties use
    def reference(self) -> dict[str, np.ndarray]:
        """The big batch's gradient: one plain backward over every row, no accumulator."""
        if self._reference is None:
            model = self.subject.build()
            self._reference = self.subject.reference_gradient(model, reduction=self.reduction,
                                                              items=self.items(model))
        return self._reference

    def inexact(self, random_only: bool = False) -> list[str]:
        """Why the model cannot match the big batch (empty when it can): the properties are then
        inconclusive. ``random_only``: why a window cannot match a rerun of itself."""
        if random_only not in self._inexact:
            reasons = [] if random_only else inexact_layers(self.subject.build(), keyed_dropout=True)
            if self._random:
                reasons.append(self._random)
            if not random_only and not reasons:
                reasons += self._rows_interact()
            if not any(np.any(g != 0) for g in self.reference().values()):
                reasons.append("the big batch's gradient is 0 for every parameter: there is nothing to compare "
                               "(does the loss depend on the parameters?)")
            self._inexact[random_only] = reasons
        return self._inexact[random_only]

    def _rows_interact(self) -> list[str]:
        """The sum of the rows' gradients against the whole batch's, within the bound for one row per
        micro-batch: a loss that is a sum over items satisfies it, whatever the model."""
        if self._row_failure:
            return [self._row_failure]
        magnitudes = self.magnitudes()
        if not all(np.all(np.isfinite(t)) for t in magnitudes.total.values()):
            return []  # a row alone gives NaN or inf: every window holding it fails, with that gap
        summed = self.subject.reference_gradient(self.subject.build(), reduction="sum")
        bound = parameter_walk_bound(magnitudes, magnitudes.rows, self.subject.dtype, "sum")
        worst = ("", 0.0, 0.0, 0.0)
        for name, total in magnitudes.total.items():
            ratio, gap, tolerance = bound.excess(name, np.abs(total - summed[name]))
            if ratio > worst[1]:
                worst = (name, ratio, gap, tolerance)
        name, ratio, gap, tolerance = worst
        if ratio <= 1.0:
            return []
        return [f"the rows of the batch interact: the loss is not a sum over items (the whole batch's gradient "
                f"of {name!r} differs from the sum of its rows' by {gap:.3e}, {ratio:.3g} times the rounding "
                "bound): batch statistics, a centering or normalization over the batch, an in-batch "
                "contrastive loss, or random draws that depend on the batch"]

    def magnitudes(self) -> RowMagnitudes:
        """Every row's gradient magnitudes, measured once."""
        if self._magnitudes is None:
            raise ValueError(f"no rounding bound: {self._row_failure}")
        return self._magnitudes

    def tolerance(self, micro_batches: int) -> Tolerance:
        """The rounding bound for a window of ``micro_batches`` (or the caller's rtol)."""
        if self.rtol is not None:
            return relative_tolerance(self.rtol, self.reference())
        if self.inexact():
            return Tolerance({name: np.zeros(()) for name in self.reference()},
                             "none: the model is not expected to match the big batch (see the notes)")
        return parameter_walk_bound(self.magnitudes(), micro_batches, self.subject.dtype, self.reduction)

    def bound_at(self, model: Module, rows: np.ndarray, micro_batches: int) -> Tolerance:
        """The rounding bound of a window over ``rows`` (batch row numbers) of ``micro_batches``, at
        ``model``'s current parameters (an optimizer has moved them): its rows measured again."""
        subject = self.subject
        magnitudes = RowMagnitudes.measure(model, lambda part: subject.loss(model, rows[part]), len(rows),
                                           twin=self._twin(model, rows))
        magnitudes.noise_source = magnitudes.noise_source or self._twin_failure
        if self._own_items:
            own = self.items_in(model, rows)
            magnitudes.items = own.positions if own is not None else magnitudes.items
        return parameter_walk_bound(magnitudes, micro_batches, subject.dtype, self.reduction)

    def longest_split(self) -> tuple[int, ...]:
        """The split the one-window properties use: an uneven one if any (uneven sizes are what
        normalization gets wrong), the one with the most micro-batches among those."""
        return max(self.splits, key=lambda sizes: (len(set(sizes)) > 1, len(sizes)))

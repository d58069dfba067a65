"""What every property of one check shares: the subject, the recipe under test, the splits, and
the reference quantities measured once (the big batch's gradient, the per-row magnitudes that
size the rounding bound)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from minitorch_accum.testing.parameter_bound import (
    RowMagnitudes,
    Tolerance,
    parameter_walk_bound,
    relative_tolerance,
)
from minitorch_accum.testing.recipes import Recipe
from minitorch_accum.testing.subject import Subject, inexact_layers

__all__ = ["CheckContext", "Window", "check_splits", "parts_of"]


class Window(NamedTuple):
    """Micro-batch sizes and the Accumulator's k (more than ``len(sizes)``: a partial window)."""

    sizes: tuple[int, ...]
    steps: int


def parts_of(sizes: Sequence[int]) -> list[slice]:
    """The rows of each micro-batch of a split, in order."""
    bounds = np.cumsum((0, *sizes))
    return [slice(int(a), int(b)) for a, b in pairwise(bounds)]


def check_splits(splits: Sequence[int] | Sequence[Sequence[int]], rows: int) -> tuple[tuple[int, ...], ...]:
    """One split (sizes) or several, as a tuple of size tuples, each checked to cover ``rows``."""
    if not splits:
        raise ValueError("splits: give at least one split, e.g. (3, 1, 4)")
    many = [tuple(s) for s in splits] if not isinstance(splits[0], int | np.integer) else [tuple(splits)]
    for sizes in many:
        if not sizes or any(isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1 for n in sizes):
            raise ValueError(f"splits: micro-batch sizes must be positive ints, got {sizes}")
        if sum(sizes) != rows:
            raise ValueError(f"splits: {sizes} covers {sum(sizes)} rows, the batch holds {rows}")
    return tuple(tuple(int(n) for n in sizes) for sizes in many)


@dataclass
class CheckContext:
    """One subject under one recipe, over ``splits``; ``rtol`` replaces the derived bound."""

    subject: Subject
    splits: tuple[tuple[int, ...], ...]
    recipe: Recipe = field(default_factory=Recipe)
    rtol: float | None = None
    world_size: int = 2
    epochs: int = 2
    _reference: dict[str, np.ndarray] | None = field(default=None, repr=False)
    _magnitudes: RowMagnitudes | None = field(default=None, repr=False)
    _inexact: dict[bool, list[str]] = field(default_factory=dict, repr=False)

    @property
    def reduction(self) -> str:
        """What the reference divides by: nothing for ``"sum"``, the items otherwise."""
        return "sum" if self.recipe.reduction == "sum" else "items"

    def reference(self) -> dict[str, np.ndarray]:
        """The big batch's gradient: one plain backward over every row, no accumulator."""
        if self._reference is None:
            self._reference = self.subject.reference_gradient(self.subject.build(), reduction=self.reduction)
        return self._reference

    def inexact(self, random_only: bool = False) -> list[str]:
        """Why the model cannot match the big batch (empty when it can); ``random_only``: why a
        window cannot match a rerun of itself (dropout)."""
        if random_only not in self._inexact:
            self._inexact[random_only] = inexact_layers(self.subject.build(), random_only)
        return self._inexact[random_only]

    def tolerance(self, micro_batches: int) -> Tolerance:
        """The rounding bound for a window of ``micro_batches`` (or the caller's rtol)."""
        if self.rtol is not None:
            return relative_tolerance(self.rtol, self.reference())
        if self.inexact():
            return Tolerance({name: np.zeros(()) for name in self.reference()},
                             "none: the model is not expected to match the big batch (see the notes)")
        if self._magnitudes is None:
            model = self.subject.build()
            self._magnitudes = RowMagnitudes.measure(model, lambda rows: self.subject.loss(model, rows),
                                                     self.subject.rows)
        return parameter_walk_bound(self._magnitudes, micro_batches, self.subject.dtype, self.reduction)

    def longest_split(self) -> tuple[int, ...]:
        """The split the one-window properties use: an uneven one if any (uneven sizes are what
        normalization gets wrong), the one with the most micro-batches among those."""
        return max(self.splits, key=lambda sizes: (len(set(sizes)) > 1, len(sizes)))

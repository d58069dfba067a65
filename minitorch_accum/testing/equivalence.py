"""Check that gradient accumulation is exact for *your* model.

    from minitorch_accum.testing import check_accumulation

    def loss_fn(output, targets):                 # a summed loss and its item count
        return F.cross_entropy(output, targets, reduction="sum"), F.count_items(targets)

    report = check_accumulation(make_model, loss_fn, (x, y))      # raises AccumulationMismatch
    print(report)                                 # the worst gap per parameter, the tolerance and why

``check_accumulation`` compares the window with the big batch; ``check_properties`` runs every
property of ``minitorch_accum.testing.properties`` (k x b == k*b after optimizer steps, clipping,
loss scaling, resume, data parallelism) and is what the pytest fixture ``accumulation_equivalence``
calls. Without ``splits`` the splits are drawn by hypothesis (when installed; a seeded draw
otherwise, and inside a running hypothesis test, where nesting one is not allowed), always with
one micro-batch of everything and one row per micro-batch among them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minitorch_accum.accum import FUSIONS
from minitorch_accum.accum.normalization import check_reduction
from minitorch_accum.nn import BatchNorm1d, Module
from minitorch_accum.testing.check_context import CheckContext, check_splits
from minitorch_accum.testing.properties import PROPERTIES, property_named
from minitorch_accum.testing.property_results import FAILED, INEXACT, AccumulationMismatch, PropertyResult
from minitorch_accum.testing.recipes import Recipe
from minitorch_accum.testing.subject import LossFn, Subject

__all__ = ["AccumulationReport", "check_accumulation", "check_properties", "default_splits"]

_DRAWN = 6  # hypothesis-drawn splits per check, besides the two fixed ones
_MAX_ONE_PER_ROW = 32  # one row per micro-batch is among the splits up to this many rows


@dataclass
class AccumulationReport:
    """Every property run on one model: its verdict, its worst gap per parameter, its tolerance's why."""

    results: list[PropertyResult]
    splits: tuple[tuple[int, ...], ...]
    dtype: str
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no property failed (one that is not expected to hold does not fail)."""
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> list[PropertyResult]:
        return [r for r in self.results if r.status == FAILED]

    @property
    def inexact(self) -> list[PropertyResult]:
        """The properties reported "not expected to be equal" (the model's nature, not a bug)."""
        return [r for r in self.results if r.status == INEXACT]

    def __getitem__(self, name: str) -> PropertyResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"the report has no property {name!r}; it ran {', '.join(r.name for r in self.results)}")

    def gaps(self) -> dict[str, float]:
        """The worst gap per parameter over every property."""
        worst: dict[str, float] = {}
        for result in self.results:
            for name, gap in result.gaps().items():
                worst[name] = max(worst.get(name, 0.0), gap)
        return worst

    def __str__(self) -> str:
        lines = [f"accumulation check ({self.dtype}) over {len(self.splits)} split(s): "
                 + ", ".join(str(s) for s in self.splits)]
        lines += [f"  {r.summary()}" for r in self.results]
        first = next((r for r in self.results if r.worst), None)
        if first is not None:
            _, worst = first.worst_parameter()
            lines.append(f"  tolerance of {first.name} there: {worst.why or first.why}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def default_splits(rows: int, drawn: int = _DRAWN) -> tuple[tuple[int, ...], ...]:
    """The whole batch as one micro-batch, one row per micro-batch (small batches), and ``drawn``
    uneven splits (hypothesis when installed and not already running, else a seeded draw)."""
    fixed = [(rows,)] + ([(1,) * rows] if 1 < rows <= _MAX_ONE_PER_ROW else [])
    extra = _hypothesis_splits(rows, drawn)
    if extra is None:
        rng = np.random.default_rng(rows)
        extra = []
        for _ in range(drawn):
            parts = int(rng.integers(1, min(rows, 6) + 1))
            cuts = np.sort(rng.choice(np.arange(1, rows), size=parts - 1, replace=False)) if parts > 1 else []
            extra.append(tuple(int(n) for n in np.diff([0, *cuts, rows])))
    return tuple(dict.fromkeys([*fixed, *extra]))


def _hypothesis_splits(rows: int, count: int) -> list[tuple[int, ...]] | None:
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis.control import currently_in_test_context

        from minitorch_accum.testing.accumulation_strategies import splits
    except ImportError:
        return None
    if currently_in_test_context():
        return None
    drawn: list[tuple[int, ...]] = []

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(splits(rows))
    def collect(sizes: tuple[int, ...]) -> None:
        drawn.append(sizes)

    collect()
    return drawn


def _context(model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any, splits: Any, reduction: str,
             fusion: str, dtype: str, rtol: float | None, recipe: Recipe | None) -> CheckContext:
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    subject = Subject(model_factory, loss_fn, tuple(batch), dtype)
    subject.build_identical(2)  # every property compares freshly built models: they must start equal
    if splits is not None:
        chosen = check_splits(splits, subject.rows)
    else:
        chosen = default_splits(subject.rows)
        if any(isinstance(m, BatchNorm1d) and m.training for m in subject.build().modules()):
            # training-mode BatchNorm needs two items per micro-batch to have statistics at all
            chosen = tuple(s for s in chosen if min(s) >= 2) + (
                ((subject.rows // 2, subject.rows - subject.rows // 2),) if subject.rows >= 4 else ())
            chosen = tuple(dict.fromkeys(chosen))
    return CheckContext(subject, chosen, recipe or Recipe(check_reduction(reduction), fusion), rtol)


def check_accumulation(model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any, *,
                       splits: Sequence[int] | Sequence[Sequence[int]] | None = None, reduction: str = "items",
                       fusion: str = "gemm", dtype: str = "float64", rtol: float | None = None) -> AccumulationReport:
    """Accumulate ``batch`` over each split (as a full window and as a partial one) and compare with one
    backward over the whole batch, on two models built by ``model_factory`` (seed it: both must start
    equal).

    ``loss_fn(output, targets)`` returns the loss *summed* over its items and their number (see
    ``minitorch_accum.testing.subject``); ``batch`` is ``(inputs, targets)``, rows along axis 0;
    ``splits``: micro-batch sizes, one split or several (None: drawn, see ``default_splits``);
    ``reduction``/``fusion``: the Accumulator's; ``dtype``: the model's and the batch's floats.
    The tolerance is the rounding bound for ``dtype`` and each split's k (``parameter_bound.py``),
    or ``rtol`` x each parameter's largest gradient entry when given. Returns the report; raises
    ``AccumulationMismatch`` naming the parameter, the split and the gap when a window is off. A
    model with training-mode BatchNorm or active dropout is reported "not expected to be equal"."""
    ctx = _context(model_factory, loss_fn, batch, splits, reduction, fusion, dtype, rtol, None)
    result = PROPERTIES["window_equals_full_batch"](ctx)
    report = AccumulationReport([result], ctx.splits, dtype, list(result.notes))
    result.raise_if_failed()
    return report


def check_properties(model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any, *,
                     properties: Iterable[str] | None = None,
                     splits: Sequence[int] | Sequence[Sequence[int]] | None = None, reduction: str = "items",
                     fusion: str = "gemm", dtype: str = "float64", rtol: float | None = None,
                     recipe: Recipe | None = None, raise_on_failure: bool = True) -> AccumulationReport:
    """Run ``properties`` (names from ``minitorch_accum.testing.properties.PROPERTIES``; all of them by
    default) on the model, with the arguments of ``check_accumulation``. ``recipe``: how micro-batches
    become steps (the library's ``Recipe`` by default; the bug museum passes faulty ones). Raises
    ``AccumulationMismatch`` for the first failed property (all of them listed) unless
    ``raise_on_failure`` is False."""
    ctx = _context(model_factory, loss_fn, batch, splits, reduction, fusion, dtype, rtol, recipe)
    chosen = list(PROPERTIES) if properties is None else list(properties)
    results = [property_named(name)(ctx) for name in chosen]
    report = AccumulationReport(results, ctx.splits, dtype, list(dict.fromkeys(n for r in results for n in r.notes)))
    if raise_on_failure and report.failures:
        error = AccumulationMismatch(report.failures[0])
        if len(report.failures) > 1:
            error.add_note("also failed: " + "; ".join(r.summary() for r in report.failures[1:]))
        raise error
    return report

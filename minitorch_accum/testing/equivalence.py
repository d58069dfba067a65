"""Check that gradient accumulation is exact for *your* model.

    from minitorch_accum.testing import check_accumulation

    def loss_fn(output, targets):                 # a summed loss and its item count
        return F.cross_entropy(output, targets, reduction="sum"), F.count_items(targets)

    report = check_accumulation(MyModel, loss_fn, (x, y))      # raises AccumulationMismatch
    print(report)                                 # the worst gap per parameter, the tolerance and why

``check_accumulation`` compares the window with the big batch; ``check_properties`` runs every
property of ``minitorch_accum.testing.properties`` (k x b == k*b after optimizer steps, clipping,
loss scaling, resume, data parallelism) and is what the pytest fixture ``accumulation_equivalence``
calls. Without ``splits`` the splits are the same on every run (``default_splits``: one micro-batch
of everything, one row per micro-batch, and uneven ones drawn from a generator seeded by the
batch's rows). A report passes only when a property really compared something and none failed;
an inconclusive property (a model that cannot match the big batch by nature) fails the check
unless ``allow_inconclusive=True``. Every failure ends with the line that replays it.
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
from minitorch_accum.testing.property_results import (
    FAILED,
    INEXACT,
    PASSED,
    AccumulationMismatch,
    PropertyResult,
)
from minitorch_accum.testing.recipes import Recipe
from minitorch_accum.testing.subject import LossFn, Subject, check_dtype

__all__ = ["AccumulationReport", "check_accumulation", "check_properties", "default_splits"]

_DRAWN = 6  # drawn splits per check, besides the two fixed ones
_MAX_ONE_PER_ROW = 32  # one row per micro-batch is among the splits up to this many rows


@dataclass
class AccumulationReport:
    """Every property run on one model: its verdict, its worst gap per parameter, its tolerance's why."""

    results: list[PropertyResult]
    splits: tuple[tuple[int, ...], ...]
    dtype: str
    notes: list[str] = field(default_factory=list)
    allow_inconclusive: bool = False

    @property
    def passed(self) -> bool:
        """True when no property failed and some property compared and held; an inconclusive property
        (it compared, but the model cannot match the big batch by nature) fails the report unless
        ``allow_inconclusive``, which lets it stand for a pass."""
        if self.failures or (self.inexact and not self.allow_inconclusive):
            return False
        return any(r.status == PASSED or (r.status == INEXACT and self.allow_inconclusive) for r in self.results)

    @property
    def failures(self) -> list[PropertyResult]:
        return [r for r in self.results if r.status == FAILED]

    @property
    def inexact(self) -> list[PropertyResult]:
        """The inconclusive properties (the model cannot match the big batch by nature)."""
        return [r for r in self.results if r.status == INEXACT]

    @property
    def inconclusive(self) -> list[PropertyResult]:
        """The inconclusive properties (``inexact``'s other name)."""
        return self.inexact

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

    def raise_if_failed(self) -> AccumulationReport:
        """Raise ``AccumulationMismatch`` for the first failed (or, unless allowed, inconclusive) property,
        every other one listed; a report that compared nothing raises too."""
        blocking = self.failures + ([] if self.allow_inconclusive else self.inexact)
        if blocking:
            first = blocking[0]
            error = AccumulationMismatch(first, self.notes)
            if len(blocking) > 1:
                error.add_note("also: " + "; ".join(r.summary() for r in blocking[1:]))
            raise error from first.error
        if not self.passed:
            raise AccumulationMismatch(self.results[0], self.notes + ["no property compared anything"])
        return self

    def __str__(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        lines = [f"accumulation check ({self.dtype}) over {len(self.splits)} split(s): "
                 + ", ".join(str(s) for s in self.splits) + f": {verdict}"]
        lines += [f"  {r.summary()}" for r in self.results]
        first = next((r for r in self.results if r.worst), None)
        if first is not None:
            _, worst = first.worst_parameter()
            lines.append(f"  tolerance of {first.name} there: {worst.why or first.why}")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  replay {r.name}: {r.replay}" for r in self.results if r.replay and r.status != PASSED]
        return "\n".join(lines)


def default_splits(rows: int, drawn: int = _DRAWN) -> tuple[tuple[int, ...], ...]:
    """The whole batch as one micro-batch, one row per micro-batch (small batches), and ``drawn``
    uneven splits from a generator seeded by ``rows``: the same splits on every run."""
    if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
        raise ValueError(f"default_splits: rows must be a positive int, got {rows!r}")
    fixed = [(rows,)] + ([(1,) * rows] if 1 < rows <= _MAX_ONE_PER_ROW else [])
    rng = np.random.default_rng(rows)
    extra = []
    for _ in range(drawn if rows > 1 else 0):
        parts = int(rng.integers(2, min(rows, 6) + 1))
        cuts = np.sort(rng.choice(np.arange(1, rows), size=parts - 1, replace=False))
        extra.append(tuple(int(n) for n in np.diff([0, *cuts, rows])))
    return tuple(dict.fromkeys([*fixed, *extra]))


def _context(model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any, splits: Any, reduction: str,
             fusion: str, dtype: Any, rtol: float | None, recipe: Recipe | None, seed: int) -> CheckContext:
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    if rtol is not None and not (isinstance(rtol, int | float) and rtol > 0):
        raise ValueError(f"rtol must be positive, got {rtol!r}")
    probe = Subject(model_factory, loss_fn, batch if not isinstance(batch, list) else tuple(batch), "float64", seed)
    native = probe.native_dtype()
    if native is None and not list(probe.build().parameters()):
        # else "several float dtypes" below, or every property crashing in its first backward
        raise ValueError(f"model_factory built a {type(probe.build()).__name__} with no parameters: there is no "
                         "gradient to accumulate, nothing to check")
    notes = []
    if dtype is None:
        if native is None:
            raise TypeError("dtype: the model's parameters hold several float dtypes; pass the one to check, "
                            "dtype='float32' or 'float64'")
        chosen_dtype = native
    else:
        chosen_dtype = check_dtype(dtype)
        if native is not None and native != chosen_dtype:
            notes.append(f"the model's parameters are {native}; checked in {chosen_dtype} as dtype= asks, so "
                         f"{native}'s own rounding is not what is checked (dtype=None checks the model as built)")
    subject = Subject(model_factory, loss_fn, probe.batch, chosen_dtype, seed)
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
    ctx = CheckContext(subject, chosen, recipe or Recipe(check_reduction(reduction), fusion), rtol)
    ctx.notes[:0] = notes
    return ctx


def _run(ctx: CheckContext, names: list[str], replay: dict[str, Any]) -> list[PropertyResult]:
    """Each property in turn; one that raises fails with its error, and the others still run."""
    results = []
    for name in names:
        try:
            result = property_named(name)(ctx)
        except Exception as error:
            result = PropertyResult(name, "").crashed(error)
        worst = result.worst_parameter()[1].split if result.worst else None
        chosen = [worst] if worst is not None else list(ctx.splits)
        keywords = {"splits": chosen, "seed": ctx.subject.seed, "dtype": ctx.subject.dtype,
                    "properties": [name], **replay}
        result.replay = ("check_properties(model_factory, loss_fn, batch, "
                         + ", ".join(f"{k}={v!r}" for k, v in keywords.items()) + ")")
        results.append(result)
    return results


def _non_defaults(reduction: str, fusion: str, rtol: float | None, recipe: Recipe | None,
                  allow_inconclusive: bool) -> dict[str, Any]:
    given = {"reduction": (reduction, "items"), "fusion": (fusion, "gemm"), "rtol": (rtol, None),
             "allow_inconclusive": (allow_inconclusive, False)}
    keywords = {k: v for k, (v, default) in given.items() if v != default}
    if recipe is not None and type(recipe) is not Recipe:
        keywords["recipe"] = _Verbatim(f"{type(recipe).__name__}()")
    return keywords


class _Verbatim(str):
    def __repr__(self) -> str:
        return str(self)


def check_accumulation(model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any, *,
                       splits: Sequence[int] | Sequence[Sequence[int]] | None = None, reduction: str = "items",
                       fusion: str = "gemm", dtype: Any = None, rtol: float | None = None, seed: int = 0,
                       allow_inconclusive: bool = False) -> AccumulationReport:
    """Accumulate ``batch`` over each split (as a full window and as a partial one) and compare with one
    backward over the whole batch, on models built by ``model_factory`` (the check seeds the library's
    generator with ``seed`` around each call, so they start equal).

    ``loss_fn(output, targets)`` returns the loss *summed* over its items and their number (see
    ``minitorch_accum.testing.subject``); ``batch`` is ``(inputs, targets)``, rows along axis 0 (two
    rows at least); ``splits``: micro-batch sizes, one split or several (None: ``default_splits``);
    ``reduction``/``fusion``: the Accumulator's; ``dtype``: the precision checked (None: the model's
    own; a name, ``np.float32`` or ``mta.float32``). The tolerance is the rounding bound for ``dtype``
    and each split's k (``parameter_bound.py``), or ``rtol`` x each parameter's largest gradient entry
    when given. Returns the report; raises ``AccumulationMismatch`` naming the parameter, the split
    and the gap when a window is off, or the reason when the check is inconclusive (training-mode
    BatchNorm, rows that interact, a forward random beyond dropout) unless ``allow_inconclusive``."""
    ctx = _context(model_factory, loss_fn, batch, splits, reduction, fusion, dtype, rtol, None, seed)
    results = _run(ctx, ["window_equals_full_batch"], _non_defaults(reduction, fusion, rtol, None,
                                                                   allow_inconclusive))
    report = AccumulationReport(results, ctx.splits, ctx.subject.dtype,
                                list(dict.fromkeys([*ctx.notes, *results[0].notes])), allow_inconclusive)
    return report.raise_if_failed()


def check_properties(model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any, *,
                     properties: Iterable[str] | None = None,
                     splits: Sequence[int] | Sequence[Sequence[int]] | None = None, reduction: str = "items",
                     fusion: str = "gemm", dtype: Any = None, rtol: float | None = None,
                     recipe: Recipe | None = None, raise_on_failure: bool = True, seed: int = 0,
                     allow_inconclusive: bool = False) -> AccumulationReport:
    """Run ``properties`` (names from ``minitorch_accum.testing.properties.PROPERTIES``; all of them by
    default) on the model, with the arguments of ``check_accumulation``. ``recipe``: how micro-batches
    become steps (the library's ``Recipe`` by default; the bug museum passes faulty ones). A property
    that raises fails with its error and the others still run. Raises ``AccumulationMismatch`` for the
    first failed (or inconclusive) property, all of them listed, unless ``raise_on_failure`` is False."""
    chosen = list(PROPERTIES) if properties is None else list(properties)
    for name in chosen:
        property_named(name)  # an unknown name is refused before anything runs
    ctx = _context(model_factory, loss_fn, batch, splits, reduction, fusion, dtype, rtol, recipe, seed)
    results = _run(ctx, chosen, _non_defaults(reduction, fusion, rtol, recipe, allow_inconclusive))
    notes = list(dict.fromkeys([*ctx.notes, *(n for r in results for n in r.notes)]))
    report = AccumulationReport(results, ctx.splits, ctx.subject.dtype, notes, allow_inconclusive)
    return report.raise_if_failed() if raise_on_failure else report

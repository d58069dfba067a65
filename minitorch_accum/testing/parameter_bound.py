"""A rounding bound on |window - big batch| for any Module, found by walking its parameters.

``rounding.py`` analyses models it can read layer by layer (Sequentials of Linear,
activations and Embedding). For any other model this module bounds the gap from what
every model has: the per-row gradients, a second evaluation of them, and the parameters'
shapes.

Both gradients compute the same sum over the batch's rows of per-row gradients ``g_r``
(each the gradient of row r's summed loss). One evaluation's value is
``s sum_r (g_r + e_r) + sigma``: ``e_r`` the error its arithmetic makes inside row r (the
row's forward, its backward, the sums over its positions), ``sigma`` the error of adding
the rows. Higham's bound for a sum of n terms computed in any order is
``gamma_n sum |terms|`` (``gamma_n = n u / (1 - n u)``, u the dtype's unit roundoff); with
T the terms summed (items or rows, the larger) and F the sum of every parameter's leading
dimension (a Linear's fan-in, a LayerNorm's width, an embedding's rows: the dot-product
lengths a first-order error can cross, an over-count), ``gamma_(T+F) sum_r |g_r|`` covers
sigma and every ``e_r`` that is small next to ``|g_r|``. The window adds its k micro-batch
sums (``k u sum_r |g_r|``) and scales once (``u |G|``); both sides err, hence the 2.

That misses the rows whose terms cancel: a key bias's gradient is a sum of terms as large
as the attention's other gradients that add up to exactly 0 (softmax ignores a constant
added to every key), so ``g_r`` is rounding noise, ``sum_r |g_r|`` is 1e-31, and ``e_r`` is
1e-18. So ``e_r`` is measured: every row's gradient is evaluated again in another precision
(``Twin``). For a float32 check the twin is float64, 2^29 times more precise, and
``|g_r - g_r^64|`` is the float32 row's error; for a float64 check the twin is float32, and
``(u64 / u32) |g_r^32 - g_r^64|`` estimates the float64 row's error (to first order a row's
error is one fixed combination of its terms' magnitudes times u). The floor adds, per
parameter, ``NOISE_FACTOR max_entries sum_r e_r / N``: the rows summed as if they all erred
one way, the parameter's largest entry (a normwise floor, so that an entry whose measured
error happens to be 0 is covered too), times 2 for the two sides and 2 because a
measurement is one realization of the rounding, not its worst case:

    bound = s (2 gamma_(T+F) + k u) sum_r |g_r| + u s |G| + 4 s max_entries sum_r e_r,
    s = 1/N items (1 for "sum")

The first part is a proof; the floor is a measurement, and ``false_alarms.py`` measures how
it holds (docs/equivalence.md publishes the table). The per-row gradients are measured once
per check, with two backward passes per row.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn import Module

__all__ = ["NOISE_FACTOR", "UNIT_ROUNDOFF", "RowMagnitudes", "Tolerance", "Twin", "leading_dimension_sum",
           "parameter_walk_bound", "relative_tolerance"]

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def _gamma(n: int, u: float) -> float:
    return n * u / (1.0 - n * u)


def leading_dimension_sum(model: Module) -> int:
    """F: the sum of every parameter's leading dimension (1 for a scalar parameter)."""
    return sum(int(p.shape[0]) if p.shape else 1 for p in model.parameters())


@dataclass(frozen=True)
class Tolerance:
    """An elementwise bound on |window - full batch| per parameter name, and why it is what it is."""

    bounds: dict[str, np.ndarray]
    why: str

    def excess(self, name: str, gap: np.ndarray) -> tuple[float, float, float]:
        """(worst gap / bound, that gap, that bound) over ``name``'s elements; a ratio above 1 fails."""
        gap = np.where(np.isnan(gap), np.inf, gap)  # a nan gradient on one side is as far off as it gets
        bound = np.broadcast_to(np.asarray(self.bounds[name], dtype=np.float64), gap.shape)
        if gap.size == 0:
            return 0.0, 0.0, 0.0
        # a gap where the bound is 0 (or not finite) is infinitely over it, an infinite gap too; no gap is never over
        ratio = np.full(gap.shape, np.inf)
        np.divide(gap, bound, out=ratio, where=(bound > 0) & np.isfinite(bound) & np.isfinite(gap))
        ratio[gap == 0] = 0.0
        worst = int(np.argmax(ratio))
        return float(ratio.flat[worst]), float(gap.flat[worst]), float(bound.flat[worst])


@dataclass(frozen=True)
class Twin:
    """The same model in another precision, for a second evaluation of every row's gradient:
    ``row_loss`` as ``RowMagnitudes.measure`` takes it, and ``scale``, what turns the two
    evaluations' difference into the checked dtype's error (1 when the twin is the more precise;
    u / u_twin when it is the less precise and its own error is measured)."""

    model: Module
    row_loss: Callable[[slice], tuple[Tensor, int]]
    dtype: str
    scale: float


@dataclass
class RowMagnitudes:
    """Per parameter (float64): sum_r |g_r|, |sum_r g_r| and sum_r g_r over the rows' gradients g_r,
    the batch's items and rows, and ``noise``: sum_r of each row's measured rounding error (a second
    evaluation in another precision, ``Twin``), None when no second evaluation could run."""

    abs_sum: dict[str, np.ndarray]
    sum_abs: dict[str, np.ndarray]
    items: int
    rows: int
    fan: int = field(default=0)
    total: dict[str, np.ndarray] = field(default_factory=dict)
    row_items: list[int] = field(default_factory=list)
    noise: dict[str, np.ndarray] | None = None
    noise_source: str = ""

    @classmethod
    def measure(cls, model: Module, row_loss: Callable[[slice], tuple[Tensor, int]], rows: int,
                twin: Twin | None = None) -> RowMagnitudes:
        """One backward per row of ``row_loss(slice(r, r + 1))`` (a summed loss and its items); with a
        ``twin``, one more per row in its precision, whose difference measures the row's rounding error."""
        named = list(model.named_parameters())
        abs_sum = {n: np.zeros(p.shape) for n, p in named}
        total = {n: np.zeros(p.shape) for n, p in named}
        noise = {n: np.zeros(p.shape) for n, p in named}
        twin_params = dict(twin.model.named_parameters()) if twin is not None else {}
        source = ""
        row_items = []
        for r in range(rows):
            loss, count = row_loss(slice(r, r + 1))
            row_items.append(count)
            grads = loss.backward()
            row = {name: np.asarray(grads[p], dtype=np.float64) if p in grads else np.zeros(p.shape)
                   for name, p in named}
            for name, g in row.items():
                abs_sum[name] += np.abs(g)
                total[name] += g
            if twin is not None and noise is not None:
                noise, source = cls._twin_noise(twin, twin_params, r, row, noise)
        return cls(abs_sum, {n: np.abs(t) for n, t in total.items()}, sum(row_items), rows,
                   leading_dimension_sum(model), total, row_items, noise if twin is not None else None, source)

    @staticmethod
    def _twin_noise(twin: Twin, params: dict[str, Any], r: int, row: dict[str, np.ndarray],
                    noise: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray] | None, str]:
        """Add row r's measured error to ``noise``; None (and why) when the twin cannot evaluate it."""
        try:
            loss, _ = twin.row_loss(slice(r, r + 1))
            grads = loss.backward()
        except Exception as error:  # a model that cannot run in the twin's precision: no floor, said so
            return None, f"the second evaluation in {twin.dtype} failed ({type(error).__name__}: {error})"
        for name, g in row.items():
            p = params.get(name)
            other = np.asarray(grads[p], dtype=np.float64) if p is not None and p in grads else np.zeros(g.shape)
            error = np.abs(other - g)
            if not np.all(np.isfinite(error)):
                return None, f"the second evaluation in {twin.dtype} is not finite"
            noise[name] += twin.scale * error
        return noise, f"a second evaluation of every row in {twin.dtype}"


#: the floor's factor: 2 for the two sides (the window and the big batch each err), 2 for the
#: measured error being one realization of the rounding, not its worst case
NOISE_FACTOR = 4.0


def parameter_walk_bound(magnitudes: RowMagnitudes, micro_batches: int, dtype: str,
                         reduction: str = "items") -> Tolerance:
    """The bound of the module docstring for a window of ``micro_batches`` in ``dtype``."""
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"rounding bound: no unit roundoff for dtype {dtype!r}; known: {', '.join(UNIT_ROUNDOFF)}")
    u = UNIT_ROUNDOFF[dtype]
    terms = max(magnitudes.items, magnitudes.rows)
    n = terms + magnitudes.fan
    scale = 1.0 if reduction == "sum" else 1.0 / max(magnitudes.items, 1)
    factor = 2.0 * _gamma(n, u) + micro_batches * u
    bounds = {name: scale * (factor * a + u * magnitudes.sum_abs[name]) for name, a in magnitudes.abs_sum.items()}
    why = (f"rounding bound for {dtype} (u = 2^{round(math.log2(u))}) and k = {micro_batches}: "
           f"(2 gamma_{n} + k u) sum_r |g_r| / N + u |G| / N elementwise, gamma_n = n u / (1 - n u), over "
           f"T = {terms} terms summed plus F = {magnitudes.fan} (every parameter's leading dimension: the "
           f"dot-product lengths a first-order error can cross), N = {magnitudes.items} items; per-row "
           f"gradients g_r measured by {magnitudes.rows} backward passes")
    if magnitudes.noise is not None:
        for name, noise in magnitudes.noise.items():
            bounds[name] = bounds[name] + scale * NOISE_FACTOR * float(np.max(noise, initial=0.0))
        why += (f"; plus {NOISE_FACTOR:g} max_entries sum_r e_r / N per parameter, e_r each row's rounding error "
                f"measured by {magnitudes.noise_source} (the terms that cancel inside a row, as a key bias's "
                "through softmax, err although their sum is 0)")
    elif magnitudes.noise_source:
        why += f"; no floor for terms that cancel inside a row: {magnitudes.noise_source}"
    return Tolerance(bounds, why)


def relative_tolerance(rtol: float, reference: dict[str, np.ndarray]) -> Tolerance:
    """``rtol`` times each parameter's largest full-batch gradient entry (the caller's choice)."""
    if not rtol > 0:
        raise ValueError(f"rtol must be positive, got {rtol!r}")
    bounds = {name: np.asarray(rtol * float(np.max(np.abs(g), initial=0.0))) for name, g in reference.items()}
    return Tolerance(bounds, f"rtol = {rtol:g} given by the caller: rtol x max |full-batch gradient| of each "
                             "parameter (not derived; pass rtol=None for the rounding bound)")

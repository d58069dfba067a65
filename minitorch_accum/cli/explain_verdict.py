"""The end of ``maccum explain``: is the window's gradient the big batch's, and if not, why.

The verdict is computed from what happened, not assumed from the settings. The window's
gradient is compared with the gradient of one batch holding its items (summed loss / items).
When they differ, each cause is put to the test by removing it:

- the normalization: the big batch is weighed the way the window's reduction weighs each
  item (``mean``: 1/(k n_j) for an item of micro-batch j; ``mean_nominal``: 1/(K n_j) with the
  configured K, whatever the window holds; ``sum``: 1), and compared again. Three causes are
  told apart: ``sum`` divides by nothing, a mean of means over micro-batches of unequal items,
  and ``mean_nominal``'s K on a window holding fewer micro-batches;
- BatchNorm (it normalizes each batch by its own statistics, so items are coupled) and
  dropout (a new mask for every batch): the window and the big batch are run again with
  those layers in evaluation mode, dropout first, then BatchNorm too.

A cause is named when removing it closes the gap to rounding: five in all. The algebra behind all of
it: the gradient of a sum of losses is the sum of the micro-batch gradients, so the window's
raw sum is the big batch's whatever the split; only the normalization differs, as long as
each item's loss depends on that item alone. "Within rounding" is not "bit for bit": that needs
the same NumPy SIMD target and, where the BLAS rounds a product (float64), the same BLAS kernel
everywhere (``numerics_lines`` says it, with what this process computes with and whether the
ranks differ).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import tensor
from minitorch_accum.backend.numerics import BIT_IDENTITY_NEEDS
from minitorch_accum.nn import BatchNorm1d, Dropout, Module
from minitorch_accum.nn import functional as F

__all__ = ["ALGEBRA", "LayerCheck", "WindowCheck", "check_window", "numerics_lines", "verdict_lines"]

ALGEBRA = ("the algebra: grad(sum over the window's items of loss_i) = sum over micro-batches j of "
           "grad(sum over j's items of loss_i): the window's raw sum is the big batch's summed gradient, however "
           "it is split; only the normalization differs (items: 1/N, mean: 1/(k n_j), mean_nominal: 1/(K n_j) with "
           "the configured K, sum: 1), as long as each item's loss depends on that item alone")

#: the layers whose training-mode behaviour makes a window differ, in the order they are switched off
_LAYER_KINDS: tuple[tuple[str, type], ...] = (("dropout", Dropout), ("batchnorm", BatchNorm1d))


@dataclass
class LayerCheck:
    """One kind of layer switched to evaluation mode (with those before it): its modules and the gap then."""

    kind: str
    modules: list[str]
    gap: float


@dataclass
class WindowCheck:
    """What the comparison with the big batch found (see the module docstring)."""

    reduction: str
    dtype: str
    sizes: list[int]  # items of each micro-batch of the window
    differences: dict[str, float]  # per parameter: max |window - big batch|
    gap: float
    tolerance: float
    weighted_gap: float  # against the big batch weighed as the normalization weighs its items
    ratio: float  # least-squares factor: window = ratio x big batch
    layers: list[LayerCheck] = field(default_factory=list)
    nominal: int | None = None  # the configured micro-batches per window (mean_nominal divides by it)

    @property
    def items(self) -> int:
        return sum(self.sizes)


def _model_input(x: Any, dtype: str) -> Any:
    return tensor(x, dtype=dtype) if x.dtype.kind == "f" else x


def item_weights(reduction: str, sizes: Sequence[int], nominal: int | None = None) -> list[float]:
    """The weight the window gives each item of micro-batch j, by j: the normalization spelled out
    (``nominal``: the configured micro-batches per window, which ``mean_nominal`` divides by)."""
    if reduction == "items":
        return [1.0 / sum(sizes)] * len(sizes)
    if reduction in ("mean", "mean_nominal"):
        k = nominal if reduction == "mean_nominal" and nominal else len(sizes)
        return [1.0 / (k * n) if n else 0.0 for n in sizes]
    if reduction == "sum":
        return [1.0] * len(sizes)
    raise ValueError(f"explain: no item weights known for reduction {reduction!r}")


def _big_batch(model: Module, x_all: Any, y_all: Any, rows: Sequence[int], weights: Sequence[float],
               dtype: str) -> dict[str, np.ndarray]:
    """The gradient of one batch of the window's items, each item's loss times its weight."""
    per_item = F.cross_entropy(model(_model_input(x_all, dtype)), y_all, reduction="none")
    row_weights = np.repeat(np.asarray(weights, dtype=np.float64), rows).reshape((-1,) + (1,) * (per_item.ndim - 1))
    grads = (per_item * tensor(row_weights, dtype=dtype)).sum().backward()
    return {name: np.asarray(grads[p], np.float64) for name, p in model.named_parameters() if p in grads}


def _window(model: Module, batches: Sequence[tuple[Any, Any]], reduction: str, fusion: str,
            dtype: str, nominal: int | None) -> dict[str, np.ndarray]:
    acc = Accumulator(model, steps=max(nominal or 0, len(batches)), reduction=reduction, fusion=fusion,
                      accum_dtype="float64" if dtype == "float64" else "float32")
    each = "mean" if reduction in ("mean", "mean_nominal") else "sum"
    for x, y in batches:
        loss = F.cross_entropy(model(_model_input(x, dtype)), y, reduction=each)
        acc.backward(loss, num_items=F.count_items(y))
    grads = acc.grads()
    return {name: np.asarray(grads[p], np.float64) for name, p in model.named_parameters() if p in grads}


def _gap(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.max(np.abs(a[n] - b[n]))) for n in a)


@contextmanager
def _evaluating(modules: Sequence[Module]) -> Iterator[None]:
    for m in modules:
        m.training = False
    try:
        yield
    finally:
        for m in modules:
            m.training = True


def check_window(model: Module, batches: Sequence[tuple[Any, Any]], window: dict[str, np.ndarray], x_all: Any,
                 y_all: Any, reduction: str, fusion: str, dtype: str, nominal: int | None = None) -> WindowCheck:
    """Compare ``window`` (the normalized window gradient by parameter name, of the micro-batches
    ``batches``) with one batch ``x_all, y_all`` of the same items, and test each cause of a gap
    (``nominal``: the configured micro-batches per window, for ``mean_nominal``)."""
    sizes = [F.count_items(y) for _, y in batches]
    rows = [len(y) for _, y in batches]
    plain = _big_batch(model, x_all, y_all, rows, item_weights("items", sizes), dtype)
    weights = item_weights(reduction, sizes, nominal)
    weighted = plain if reduction == "items" else _big_batch(model, x_all, y_all, rows, weights, dtype)
    scale = max(1.0, *(float(np.max(np.abs(g))) for g in window.values()))
    tolerance = (1e-12 if dtype == "float64" else 1e-5) * scale
    names = [n for n in window if n in plain]
    flat_window = np.concatenate([window[n].ravel() for n in names])
    flat_plain = np.concatenate([plain[n].ravel() for n in names])
    check = WindowCheck(
        reduction=reduction, dtype=dtype, sizes=sizes,
        differences={n: float(np.max(np.abs(window[n] - plain[n]))) for n in names},
        gap=_gap({n: window[n] for n in names}, plain), tolerance=tolerance,
        weighted_gap=_gap({n: window[n] for n in names}, weighted),
        ratio=float(flat_window @ flat_plain / max(float(flat_plain @ flat_plain), 1e-300)), nominal=nominal)
    if check.gap <= tolerance:
        return check
    switched: list[Module] = []
    for kind, layer in _LAYER_KINDS:
        found = [(name, m) for name, m in model.named_modules() if isinstance(m, layer) and m.training
                 and getattr(m, "p", 1.0) > 0]
        if not found:
            continue
        switched += [m for _, m in found]
        with _evaluating(switched):
            again = _window(model, batches, reduction, fusion, dtype, nominal)
            reference = _big_batch(model, x_all, y_all, rows, weights, dtype)
        check.layers.append(LayerCheck(kind, [name for name, _ in found], _gap(again, reference)))
    return check


def _fraction(weight: float) -> str:
    return f"1/{round(1 / weight):g}" if weight and abs(1 / weight - round(1 / weight)) < 1e-6 else f"{weight:.3g}"


def _listed(values: Sequence[Any], limit: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", ... ({len(values)} in all)" if len(values) > limit else "")


def _divisor(check: WindowCheck) -> int:
    """What the window's mean divides the sum of its micro-batch means by: the micro-batches it
    holds (``mean``), or the configured K (``mean_nominal``)."""
    if check.reduction == "mean_nominal" and check.nominal:
        return check.nominal
    return len(check.sizes)


def _normalization_causes(check: WindowCheck) -> list[str]:
    """The causes of a gap that lie in the normalization: nothing divides (``sum``), a mean of means
    over unequal micro-batches (``mean``, ``mean_nominal``), and ``mean_nominal``'s configured K on
    a window that holds fewer micro-batches; each measured by weighing the big batch so."""
    n, sizes = check.items, check.sizes
    matched = (f"the big batch matches the window to {check.weighted_gap:.1e}" if not check.layers
               else "and with the layers below switched off, the big batch matches the window")
    if check.reduction == "sum":
        if n <= 1:
            return []
        return [f"the normalization: reduction=sum divides by nothing, so each item weighs 1 where the big batch "
                f"weighs it 1/N = 1/{n}: the window is N = {n} times the big batch's gradient (measured: "
                f"{check.ratio:.4g} times). Weighed by 1, {matched}"]
    if check.reduction not in ("mean", "mean_nominal"):
        return []
    causes = []
    k, held = _divisor(check), len(sizes)
    if check.reduction == "mean_nominal" and k != held:
        causes.append(f"the normalization: reduction=mean_nominal divides by the configured K = {k} micro-batches "
                      f"whatever the window holds, and this window holds {held}: the window is {held}/{k} of the "
                      f"big batch's gradient where its micro-batches hold equal items (measured: {check.ratio:.4g} "
                      "times)")
    if len(set(sizes)) > 1:
        weights = item_weights(check.reduction, sizes, check.nominal)
        label = "K" if check.reduction == "mean_nominal" else "k"
        causes.append(f"the normalization: reduction={check.reduction} divides each micro-batch by its own items (a "
                      f"mean of means), and the micro-batches hold different numbers of items: sizes "
                      f"{_listed(sizes)}; an item of micro-batch j weighs 1/({label} n_j) = "
                      f"{_listed([_fraction(w) for w in weights])} ({label} = {k}), where the big batch weighs every "
                      f"item 1/N = 1/{n}")
    if causes:
        causes[-1] += f". Weighed so, {matched}"
    return causes


_LAYER_CAUSES = {
    "batchnorm": "BatchNorm couples the items: in training mode BatchNorm1d ({modules}) normalizes each micro-batch by "
                 "its own mean and variance and the big batch by those of all {n} items, so an item's loss depends "
                 "on which items share its batch. With it on its running statistics (evaluation mode)",
    "dropout": "the dropout masks differ: Dropout ({modules}) draws a new mask for every batch, and the window's "
               "micro-batches did not draw the masks the big batch drew. With dropout off",
}


def verdict_lines(check: WindowCheck) -> list[str]:
    """What ``maccum explain`` prints after the per-parameter differences."""
    tolerance = f"tolerance {check.tolerance:.1g} for {check.dtype}"
    lines: list[str] = []
    if check.gap <= check.tolerance:
        lines.append(f"verdict: EQUAL within rounding (largest difference {check.gap:.1e}, {tolerance})")
        n, sizes = check.items, check.sizes
        if check.reduction in ("mean", "mean_nominal"):
            k = _divisor(check)
            divides = (f"the configured K = {k}, which the window holds" if check.reduction == "mean_nominal"
                       else f"its {k} micro-batches")
            lines.append(f"why: every micro-batch holds {sizes[0]} items, and the window divides the sum of its "
                         f"{len(sizes)} micro-batch means by {divides}, so each item weighs 1/({k} x {sizes[0]}) = "
                         f"1/{k * sizes[0]}, as the big batch's mean of its {n} items does; only the order of the "
                         "additions differs")
        elif check.reduction == "sum":
            lines.append(f"why: the window holds {n} item(s), so dividing by nothing is dividing by N")
        else:
            lines.append(f"why: the window adds each item's gradient once and divides by its {n} items, which is what "
                         "the big batch does; only the order of the additions differs")
        lines.append(ALGEBRA)
        return lines
    causes = _normalization_causes(check)
    closed = check.weighted_gap <= check.tolerance
    for layer in check.layers:
        modules = ", ".join(f"module {m!r}" for m in layer.modules)
        causes.append(_LAYER_CAUSES[layer.kind].format(modules=modules, n=check.items)
                      + f" the window matches the big batch to {layer.gap:.1e}")
        closed = layer.gap <= check.tolerance
    if closed:
        lines.append(f"verdict: NOT EQUAL (largest difference {check.gap:.1e}, {tolerance}), and here is why:")
        lines += [f"  {i}. {cause}" for i, cause in enumerate(causes, 1)]
    else:
        lines.append(f"verdict: NOT EQUAL (largest difference {check.gap:.1e}, {tolerance}), and neither the "
                     "normalization nor BatchNorm nor dropout explains it: that would be a bug to report")
        lines += [f"  tried: {cause}" for cause in causes]
    lines.append(ALGEBRA + ("; BatchNorm and dropout break that" if check.layers else ""))
    return lines


def numerics_lines(this_process: str, ranks: str | None) -> list[str]:
    """What this process computes with (its fingerprint's line), the ranks' difference if any, and
    what bit-for-bit equality needs beyond the settings."""
    lines = [f"numerics: this process computes with {this_process}"]
    if ranks is not None:
        lines.append(ranks)
    lines.append(BIT_IDENTITY_NEEDS[0].upper() + BIT_IDENTITY_NEEDS[1:])
    return lines

"""The window gradient equals the big-batch gradient: float64 to 1e-12, float32 within a
derived bound; ``mean`` differs for uneven micro-batches by exactly the predicted amount."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum.accum import FUSIONS, Accumulator
from minitorch_accum.nn import functional as F
from tests.accum.helpers import SIZES, data, full_batch_grads, max_difference, mlp, split, summed_loss, window_grads


@pytest.mark.parametrize("fusion", FUSIONS)
def test_items_window_equals_full_batch_in_float64(fusion: str) -> None:
    model = mlp("float64")
    x, y = data()
    expected = full_batch_grads(model, x, y, "float64")
    acc = Accumulator(model, steps=len(SIZES), reduction="items", fusion=fusion, accum_dtype="float64")
    for part in split(len(y), SIZES):
        acc.backward(summed_loss(model, x[part], y[part], "float64"), num_items=len(y[part]))
    assert acc.is_boundary and acc.items_seen == 27
    assert max_difference(window_grads(acc, model), expected) <= 1e-12


@pytest.mark.parametrize("fusion", FUSIONS)
def test_mean_reduction_differs_by_exactly_the_predicted_amount(fusion: str) -> None:
    """Mean of per-micro-batch means weighs an item of a 1-item micro-batch 16x more than an
    item of a 16-item one; the error is sum_j (1/(k n_j) - 1/N) G_j, G_j the summed gradient
    of micro-batch j."""
    model = mlp("float64")
    x, y = data()
    parts = split(len(y), SIZES)
    sums = []
    for part in parts:
        grads = summed_loss(model, x[part], y[part], "float64").backward()
        sums.append({n: np.asarray(grads[p]) for n, p in model.named_parameters()})
    acc = Accumulator(model, steps=4, reduction="mean", fusion=fusion, accum_dtype="float64")
    for part in parts:
        acc.backward(F.cross_entropy(model(mta.tensor(x[part], dtype="float64")), y[part]))
    got = window_grads(acc, model)
    expected = full_batch_grads(model, x, y, "float64")
    k, n_total = len(SIZES), sum(SIZES)
    predicted = {n: sum((1 / (k * n_j) - 1 / n_total) * s[n] for n_j, s in zip(SIZES, sums, strict=True))
                 for n in expected}
    assert max_difference(got, expected) > 1e-3  # the bug is real and large
    assert max_difference({n: got[n] - expected[n] for n in got}, predicted) <= 1e-12


def test_mean_equals_items_when_micro_batches_are_equal() -> None:
    model = mlp("float64")
    x, y = data(24)
    acc = Accumulator(model, steps=4, reduction="mean", fusion="leaf", accum_dtype="float64")
    for part in split(24, (6, 6, 6, 6)):
        acc.backward(F.cross_entropy(model(mta.tensor(x[part], dtype="float64")), y[part]))
    assert max_difference(window_grads(acc, model), full_batch_grads(model, x, y, "float64")) <= 1e-12


def _per_item_abs_sum(model, x, y) -> dict[str, np.ndarray]:
    """sum_i |g_i| elementwise, in float64: the scale of the rounding-error bound."""
    out = None
    for i in range(len(y)):
        grads = summed_loss(model, x[i:i + 1], y[i:i + 1], "float64").backward()
        item = {n: np.abs(np.asarray(grads[p])) for n, p in model.named_parameters()}
        out = item if out is None else {n: out[n] + item[n] for n in out}
    return out


@pytest.mark.parametrize("fusion", FUSIONS)
def test_float32_window_is_within_the_rounding_bound(fusion: str) -> None:
    """Both sides sum the same terms in different orders (micro-batch GEMMs versus one GEMM,
    then the window sum). Higham's bound for a sum of n terms is gamma_n * sum|terms| with
    gamma_n ~ n u, u = 2^-24; the longest chains here are the N = 27 items plus the forward's
    fan-ins (5 + 8), and both sides err, so |window - full| <= 2 (N + 13) u sum_i |g_i| / N."""
    model = mlp("float32")
    x, y = data()
    acc = Accumulator(model, steps=4, reduction="items", fusion=fusion)
    for part in split(len(y), SIZES):
        acc.backward(summed_loss(model, x[part], y[part], "float32"), num_items=len(y[part]))
    got = window_grads(acc, model)
    expected = full_batch_grads(model, x, y, "float32")
    twin = mlp("float64")
    twin.load_record({k: v.astype(np.float64) for k, v in model.to_record().items()})
    scale = _per_item_abs_sum(twin, x, y)
    u = 2.0**-24
    for name in got:
        bound = 2 * (27 + 13) * u * scale[name] / 27 + 1e-12
        assert np.all(np.abs(got[name] - expected[name]) <= bound), name


def test_compensated_arena_is_at_least_as_close_to_the_exact_sum() -> None:
    """64 one-item micro-batches: the window sum is where rounding accumulates, and the
    Neumaier arena keeps what plain float32 addition drops."""
    x, y = data(64, seed=3)
    reference = mlp("float64", seed=2)
    exact = {n: g * 64 for n, g in full_batch_grads(reference, x, y, "float64").items()}
    errors = {}
    for compensated in (False, True):
        model = mlp("float32", seed=2)
        acc = Accumulator(model, steps=64, reduction="sum", compensated=compensated)
        for i in range(64):
            acc.backward(summed_loss(model, x[i:i + 1], y[i:i + 1], "float32"), num_items=1)
        errors[compensated] = max_difference(window_grads(acc, model), exact)
    assert errors[True] <= errors[False]


@pytest.mark.parametrize("fusion", FUSIONS)
def test_partial_window_is_normalized_by_what_it_holds(fusion: str) -> None:
    model = mlp("float64")
    x, y = data()
    parts = split(len(y), SIZES)[:2]  # 2 of 4 micro-batches: 7 + 1 items
    for reduction in ("items", "mean"):
        acc = Accumulator(model, steps=4, reduction=reduction, fusion=fusion, accum_dtype="float64")
        for part in parts:
            loss = summed_loss(model, x[part], y[part], "float64") if reduction == "items" else \
                F.cross_entropy(model(mta.tensor(x[part], dtype="float64")), y[part])
            acc.backward(loss, num_items=len(y[part]))
        assert not acc.is_boundary and acc.micro_step == 2
        got = window_grads(acc, model)
        if reduction == "items":
            expected = full_batch_grads(model, x[:8], y[:8], "float64")
        else:
            a = full_batch_grads(model, x[parts[0]], y[parts[0]], "float64")
            b = full_batch_grads(model, x[parts[1]], y[parts[1]], "float64")
            expected = {n: (a[n] + b[n]) / 2 for n in a}
        assert max_difference(got, expected) <= 1e-12

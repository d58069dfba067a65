"""A window starts with nothing of the last one: which views were written, the GEMM bounds that
prove GEMM-written views finite, the flag. After ``zero()`` the store's facts are those of an
accumulator that never saw the earlier window."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import FUSIONS, Accumulator
from minitorch_accum.observe import AccumulationTrace
from tests.accum.helpers import data, mlp, split, summed_loss


def window(acc: Accumulator, model: mta.nn.Module, x: np.ndarray, y: np.ndarray, sizes: tuple[int, ...]) -> None:
    for part in split(len(y), sizes):
        acc.backward(summed_loss(model, x[part], y[part], "float64"), num_items=len(y[part]))


@pytest.mark.parametrize("fusion", [f for f in FUSIONS if f != "none"])
def test_after_zero_the_store_holds_only_the_new_windows_facts(fusion: str) -> None:
    model = mlp("float64")
    x1, y1 = data(9, seed=1)
    x2, y2 = data(7, seed=2)
    carried = Accumulator(model, steps=3, fusion=fusion, accum_dtype="float64")
    window(carried, model, 40.0 * x1, y1, (4, 5))  # large inputs: large GEMM bounds, a large gradient
    carried.grads()
    carried.zero()
    window(carried, model, x2, y2, (3, 4))
    fresh = Accumulator(model, steps=3, fusion=fusion, accum_dtype="float64")
    window(fresh, model, x2, y2, (3, 4))
    np.testing.assert_array_equal(carried.store.gemm_bounds(), fresh.store.gemm_bounds())
    np.testing.assert_array_equal(carried.store.written_mask(), fresh.store.written_mask())
    assert carried.state_dict()["meta"]["store"] == fresh.state_dict()["meta"]["store"]
    if fusion == "gemm":
        assert carried.store.gemm_bounds().any()  # the GEMM did write, and bounded, this window
    for a, b in zip(carried.grads().values(), fresh.grads().values(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_non_finite_window_leaves_the_next_one_proven_finite_without_a_read() -> None:
    # layers wide enough for 4 rows that each GEMM keeps a bound (its factors are the smaller read)
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(5, 64, dtype="float64", rng=rng), nn.Tanh(),
                          nn.Linear(64, 48, dtype="float64", rng=rng))
    x, y = data(8, seed=3)
    acc = Accumulator(model, steps=2, fusion="gemm", accum_dtype="float64", trace=True)
    bad = x.copy()
    bad[0, 0] = np.inf
    window(acc, model, bad, y, (4, 4))
    assert acc.found_nonfinite()
    acc.zero()
    acc.trace = AccumulationTrace()
    window(acc, model, x, y, (4, 4))
    assert not acc.found_nonfinite()
    # the bounds of this window alone prove it finite: no pass reads the views to find out
    assert [e for e in acc.trace.events if e.kernel == "finite_check"] == []

"""The window reductions' factors and their errors, one by one (``accum/normalization.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from minitorch_accum.accum import Accumulator
from minitorch_accum.accum.normalization import WINDOW_REDUCTIONS, check_reduction, window_scale
from tests.accum.helpers import data, mlp, split, summed_loss, window_grads


def test_each_reduction_has_its_factor() -> None:
    assert window_scale("sum", 3, 40) == 1.0
    assert window_scale("mean", 4, 40) == 0.25
    assert window_scale("items", 3, 40) == 1 / 40
    assert window_scale("mean_nominal", 3, 40, nominal=8) == 1 / 8
    assert window_scale("mean_nominal", 1, 5, nominal=1) == 1.0  # k = 1 is a window too
    assert check_reduction("items") == "items" and WINDOW_REDUCTIONS == ("mean", "sum", "items", "mean_nominal")


def test_a_sum_window_is_the_summed_gradient() -> None:
    model = mlp("float64")
    x, y = data(9)
    acc = Accumulator(model, steps=2, reduction="sum", accum_dtype="float64")
    for part in split(9, (4, 5)):
        acc.backward(summed_loss(model, x[part], y[part], "float64"), num_items=len(y[part]))
    grads = summed_loss(model, x, y, "float64").backward()
    window = window_grads(acc, model)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(window[name], grads[p], rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: window_scale("items", 0, 0), RuntimeError,
     r"^the window is empty: call backward\(\) for at least one micro-batch first$"),
    (lambda: window_scale("items", 2, 0), RuntimeError,
     r"^reduction='items': the window holds 0 items, so it has no mean gradient$"),
    (lambda: window_scale("mean_nominal", 2, 10), ValueError,
     r"^reduction='mean_nominal' needs nominal= \(the configured micro-batches per window\)$"),
    (lambda: window_scale("mean_nominal", 2, 10, nominal=0), ValueError, r"needs nominal="),
    (lambda: check_reduction("avg"), ValueError, r"^reduction must be one of mean, sum, items, mean_nominal, "
                                                 r"got 'avg'$"),
])
def test_each_error_says_what_is_wrong(call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_an_accumulator_with_k_of_one_and_mean_nominal_divides_by_one() -> None:
    model = mlp("float64")
    x, y = data(5)
    acc = Accumulator(model, steps=1, reduction="mean_nominal", accum_dtype="float64")
    acc.backward(summed_loss(model, x, y, "float64") * (1 / 5))
    assert acc.window_scale() == 1.0

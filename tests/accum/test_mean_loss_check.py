"""A loss that is already a mean, given to an "items" window with num_items, is refused by name."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator, MeanLossError
from minitorch_accum.nn import functional as F
from tests.accum.helpers import data, max_difference, mlp, window_grads

N = 6


def _cross_entropy(model: nn.Module, reduction: str) -> mta.Tensor:
    x, y = data(N)
    return F.cross_entropy(model(mta.tensor(x, dtype="float64")), y, reduction=reduction)


def _mse_loss(model: nn.Module, reduction: str) -> mta.Tensor:
    x, _ = data(N)
    target = np.zeros((N, 3))
    return F.mse_loss(model(mta.tensor(x, dtype="float64")), target, reduction=reduction)


#: one call per loss of nn.functional (every function there with a ``reduction`` parameter)
LOSSES: dict[str, Callable[[nn.Module, str], Any]] = {"cross_entropy": _cross_entropy, "mse_loss": _mse_loss}


def test_every_loss_of_nn_functional_has_a_case_here() -> None:
    losses = {name for name in F.__all__ if callable(getattr(F, name))
              and "reduction" in inspect.signature(getattr(F, name)).parameters}
    assert losses == set(LOSSES), "a loss in nn.functional needs its case in LOSSES"


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_a_mean_loss_in_an_items_window_is_an_error_naming_both(loss: str) -> None:
    model = mlp()
    acc = Accumulator(model, steps=2, reduction="items")
    with pytest.raises(MeanLossError, match=r"already a mean .* reduction is 'items' with num_items=6") as info:
        acc.backward(LOSSES[loss](model, "mean"), num_items=N)
    assert "times too small" in str(info.value) and "allow_mean_loss=True" in str(info.value)
    assert acc.micro_step == 0  # nothing was accumulated


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_the_summed_loss_of_every_loss_is_accepted(loss: str) -> None:
    model = mlp()
    acc = Accumulator(model, steps=2, reduction="items")
    acc.backward(LOSSES[loss](model, "sum"), num_items=N)
    assert acc.micro_step == 1


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_mean_losses_are_what_a_mean_window_takes(loss: str) -> None:
    model = mlp()
    acc = Accumulator(model, steps=2, reduction="mean")
    acc.backward(LOSSES[loss](model, "mean"))
    acc.backward(LOSSES[loss](model, "mean"), num_items=N)  # num_items is a count here, never a divisor
    assert acc.micro_step == 2


@pytest.mark.parametrize("mean", [lambda t: t.sum(axis=1).mean(), lambda t: t.sum() / 6.0], ids=["mean", "sum-over-n"])
def test_a_hand_written_mean_is_recognized(mean: Callable[[mta.Tensor], mta.Tensor]) -> None:
    model = mlp()
    x, _ = data(N)
    acc = Accumulator(model, steps=1)
    with pytest.raises(MeanLossError, match="6 times too small"):
        acc.backward(mean(model(mta.tensor(x, dtype="float64"))), num_items=N)


def test_the_opt_in_gives_the_gradient_it_asked_for() -> None:
    # allow_mean_loss: the window divides the mean once more, which is what was said
    model = mlp()
    acc = Accumulator(model, steps=1)
    acc.backward(_cross_entropy(model, "mean"), num_items=N, allow_mean_loss=True)
    divided = window_grads(acc, model)
    reference = Accumulator(model, steps=1)
    reference.backward(_cross_entropy(model, "sum"), num_items=N)
    expected = {name: g / N for name, g in window_grads(reference, model).items()}
    assert max_difference(divided, expected) < 1e-15


def _outputs() -> mta.Tensor:
    x, _ = data(N)
    return mlp()(mta.tensor(x, dtype="float64"))


@pytest.mark.parametrize(("loss", "found"), [
    (lambda: _outputs().sum(axis=1).mean(), ("mean over 6 elements of sum", 6.0)),
    (lambda: _outputs().mean(), ("mean over 18 elements of linear", 18.0)),
    (lambda: _outputs().sum() / 6.0, ("a sum of linear divided by 6", 6.0)),
    (lambda: _outputs().sum() / mta.tensor(4.0, dtype="float64"), ("a sum of linear divided by 4", 4.0)),
    (lambda: mta.tensor(np.ones(3), dtype="float64", requires_grad=True).sum() / 3.0, ("a sum divided by 3", 3.0)),
    (lambda: _outputs().sum(), None),
    (lambda: _outputs().sum() * (1 / 6), None),  # a mean written as a product is not recognized
    (lambda: (_outputs() / 6.0).sum(), None),  # a division before the sum is no mean of the loss
    (lambda: _outputs().sum() / mta.tensor(6.0, dtype="float64", requires_grad=True), None),  # a learned divisor
    (lambda: mta.tensor(2.0, dtype="float64", requires_grad=True) / 3.0, None),  # a division of no sum
    (lambda: mta.tensor(3.0, dtype="float64"), None),  # no graph at all
    # column sums each divided by its own count: a mean, but of no single count
    (lambda: _outputs().sum(axis=0) / mta.tensor([2.0, 4.0, 8.0], dtype="float64"), ("a sum of linear divided by nan",
                                                                                      "nan")),
], ids=["mean-of-sums", "mean", "sum-over-n", "sum-over-tensor", "sum-of-leaf", "sum", "product", "divided-first",
        "learned-divisor", "leaf-divided", "constant", "per-column-counts"])
def test_what_counts_as_a_mean_and_the_count_it_divides_by(loss, found) -> None:
    from minitorch_accum.accum.loss_check import mean_loss_divisor

    got = mean_loss_divisor(loss())
    if found is not None and found[1] == "nan":
        assert got is not None and got[0] == found[0] and np.isnan(got[1])
    else:
        assert got == found


def test_a_loss_whose_graph_is_gone_is_not_judged() -> None:
    from minitorch_accum.accum.loss_check import mean_loss_divisor

    loss = _outputs().mean()
    loss.backward()
    assert mean_loss_divisor(loss) is None


@pytest.mark.parametrize(("loss", "what", "times"), [
    (lambda: _outputs().sum() / 6.0, "a sum of linear divided by 6", "6 times too small"),
    (lambda: _outputs().mean(), "mean over 18 elements of linear", "18 times too small"),
], ids=["sum-over-n", "mean"])
def test_the_refusal_says_everything_it_knows(loss, what: str, times: str) -> None:
    message = (f"backward: the loss is already a mean (its last op is {what}), and this window's reduction is "
               f"'items' with num_items=6: the window divides the summed gradient by its items itself, so the "
               f"gradient would come out {times}. Give the micro-batch's summed loss "
               "(F.cross_entropy(..., reduction='sum'), F.mse_loss(..., reduction='sum')), or make the window "
               "Accumulator(reduction='mean') for mean losses; pass allow_mean_loss=True if the division is on "
               "purpose")
    acc = Accumulator(mlp(), steps=1)
    with pytest.raises(MeanLossError, match=f"^{re.escape(message)}$"):
        acc.backward(loss(), num_items=N)

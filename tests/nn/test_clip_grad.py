"""nn.utils.clip_grad_norm_: PyTorch's spelling, taking where the gradients live here (a Gradients
container or an Accumulator), and refusing the parameters with a message that says so."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.nn import functional as F


def problem(seed: int = 0) -> tuple[nn.Sequential, np.ndarray, np.ndarray]:
    mta.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 7, dtype="float64"), nn.Tanh(), nn.Linear(7, 3, dtype="float64"))
    rng = np.random.default_rng(seed)
    return model, rng.normal(size=(8, 5)) * 4, rng.integers(0, 3, size=8)


def norm_of(arrays) -> float:
    return math.sqrt(sum(float(np.sum(np.asarray(a) ** 2)) for a in arrays))


def test_a_container_is_scaled_in_place_to_the_limit() -> None:
    model, x, y = problem()
    grads = F.cross_entropy(model(x), y, reduction="sum").backward()
    before = norm_of(grads.values())
    copies = [np.array(g) for g in grads.values()]
    returned = nn.utils.clip_grad_norm_(grads, before / 3)
    assert isinstance(returned, mta.Tensor) and returned.shape == () and returned.dtype == mta.float64
    assert returned.item() == pytest.approx(before, rel=1e-12)
    coef = (before / 3) / (before + 1e-6)  # PyTorch's factor
    for clipped, original in zip(grads.values(), copies, strict=True):
        np.testing.assert_allclose(clipped, original * coef, rtol=1e-12)
    assert nn.utils.clip_grad_norm_(grads, 1e9).item() == pytest.approx(before / 3, rel=1e-6)  # below: unchanged
    np.testing.assert_allclose(norm_of(grads.values()), before / 3, rtol=1e-6)


@pytest.mark.parametrize("fusion", ["gemm", "leaf", "none"])
def test_an_accumulator_window_is_clipped_by_the_window_norm(fusion: str) -> None:
    # two micro-batches of 4 against one batch of 8: the clipped window steps like the clipped big batch
    model, x, y = problem()
    big, _, _ = problem()
    acc = Accumulator(model, steps=2, reduction="items", fusion=fusion)
    for part in (slice(0, 4), slice(4, 8)):
        acc.backward(F.cross_entropy(model(x[part]), y[part], reduction="sum"), num_items=4)
    window_norm = acc.grad_norm()
    assert nn.utils.clip_grad_norm_(acc, window_norm / 4).item() == pytest.approx(window_norm, rel=1e-12)
    limit = window_norm / 4
    assert acc.grad_norm() == pytest.approx(window_norm * limit / (window_norm + 1e-6), rel=1e-12)
    optim.SGD(0.5).step(model, acc)

    grads = F.cross_entropy(big(x), y).backward()
    assert norm_of(grads.values()) == pytest.approx(window_norm, rel=1e-10)
    nn.utils.clip_grad_norm_(grads, limit)
    optim.SGD(0.5).step(big, grads)
    for (name, a), (_, b) in zip(model.named_parameters(), big.named_parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0, atol=1e-12, err_msg=name)


def test_the_parameters_are_refused_saying_where_the_gradients_are() -> None:
    model, _, _ = problem()
    for wrong in (model.parameters(), model, model[0].weight):
        with pytest.raises(TypeError, match=r"clip_grad_norm_: got parameters; gradients are not stored on "
                                            r"parameters here .*\(grads = loss.backward\(\)"):
            nn.utils.clip_grad_norm_(wrong, 1.0)
    with pytest.raises(TypeError, match="clip_grad_norm_: got a float"):
        nn.utils.clip_grad_norm_(1.0, 1.0)


def test_bad_limits_norm_types_and_non_finite_norms() -> None:
    model, x, y = problem()
    grads = F.cross_entropy(model(x), y).backward()
    with pytest.raises(ValueError, match="max_norm must be a positive number, got 0"):
        nn.utils.clip_grad_norm_(grads, 0)
    with pytest.raises(ValueError, match=r"only the L2 norm \(norm_type=2\) is offered, got norm_type=inf"):
        nn.utils.clip_grad_norm_(grads, 1.0, norm_type=float("inf"))
    first = next(iter(grads.values()))
    first.reshape(-1)[0] = np.inf
    kept = [np.array(g) for g in grads.values()]
    assert math.isinf(nn.utils.clip_grad_norm_(grads, 1.0).item())
    for a, b in zip(grads.values(), kept, strict=True):
        np.testing.assert_array_equal(a, b)  # left as it was: the step is to be skipped
    with pytest.raises(RuntimeError, match="the gradients' L2 norm is inf, so they cannot be clipped"):
        nn.utils.clip_grad_norm_(grads, 1.0, error_if_nonfinite=True)

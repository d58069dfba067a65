"""Grouping parameters into fused launches (``optim/fused_groups.py``): parameters at different
points of their history, of different dtypes, or with gradients of any layout are each stepped
by their own rule."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import kernels, nn, optim


def layer() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 2, dtype="float64", rng=np.random.default_rng(0)))


def gradients(model: nn.Module, step: int, only: str | None = None) -> mta.Gradients:
    """Gradients that depend on the step, not on the parameters; ``only`` one parameter's."""
    rng = np.random.default_rng(step)
    grads = mta.Gradients()
    for name, p in model.named_parameters():
        g = rng.normal(size=p.shape)
        if only is None or name == only:
            grads[p] = g
    return grads


@pytest.mark.parametrize("make", [lambda: optim.SGD(0.1, momentum=0.9, dampening=0.5), lambda: optim.AdamW(lr=0.1),
                                  lambda: optim.Adam(lr=0.1)], ids=["sgd-dampening", "adamw", "adam"])
def test_a_parameter_that_joins_later_starts_its_own_history(make) -> None:
    # the bias has no gradient in step 1: from step 2 on it must move as it would under an optimizer
    # that sees it for the first time there (its own momentum start, its own Adam step count)
    model, alone = layer(), layer()
    opt, fresh = make(), make()
    opt.step(model, gradients(model, 1, only="0.weight"))
    for step in (2, 3):
        opt.step(model, gradients(model, step))
        fresh.step(alone, gradients(alone, step, only="0.bias"))
    np.testing.assert_array_equal(model[0].bias.numpy(), alone[0].bias.numpy())


def test_a_16_bit_parameter_steps_in_the_float32_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    launches: list[list[str]] = []
    real = kernels.multi_sgd_momentum_step

    def recording(params: list, *args: object, **kwargs: object) -> None:
        launches.append(sorted(str(p.dtype) for p in params))
        real(params, *args, **kwargs)

    monkeypatch.setattr(kernels, "multi_sgd_momentum_step", recording)
    model = nn.Sequential(nn.Linear(2, 2, dtype="float64"), nn.Linear(2, 2, dtype="float32"),
                          nn.Linear(2, 2).to(dtype="bfloat16"))
    grads = mta.Gradients()
    for p in model.parameters():
        grads[p] = np.ones(p.shape, dtype=p.data.dtype)
    optim.SGD(0.1).step(model, grads)
    # the bf16 parameters go through their float32 master copies, beside the float32 ones
    assert sorted(launches) == [["float32"] * 4, ["float64"] * 2]


def test_a_gradient_of_any_layout_steps_as_its_contiguous_copy() -> None:
    model, twin = layer(), layer()
    base = np.random.default_rng(3).normal(size=model[0].weight.shape[::-1])
    strided, grads, copied = base.T, mta.Gradients(), mta.Gradients()
    assert not strided.flags.c_contiguous
    grads[model[0].weight] = strided
    copied[twin[0].weight] = np.ascontiguousarray(strided)
    optim.AdamW(lr=0.1).step(model, grads)
    optim.AdamW(lr=0.1).step(twin, copied)
    np.testing.assert_array_equal(model[0].weight.numpy(), twin[0].weight.numpy())

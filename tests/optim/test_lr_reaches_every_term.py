"""The scheduled learning rate reaches every term of every optimizer's update.

Each update is ``-lr`` times something the rate does not enter (SGD: the gradient plus its L2
term, or the momentum buffer; Adam: m_hat / (sqrt(v_hat) + eps) plus, for AdamW, wd * p), so
from one state a step's displacement is exactly proportional to the rate it is given. A term
that ignored the scheduled rate (used the constructor's) or no rate at all breaks the
proportion; and ``step(lr=x)`` must be the step of an optimizer made with rate x.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.nn import functional as F

BASE_LR = 1e-3  # what the optimizer is made with; the schedule's rates differ from it


@st.composite
def optimizers(draw: st.DrawFn) -> tuple[str, dict]:
    """An optimizer class and hyperparameters, every term that can be on switched on or off."""
    kind = draw(st.sampled_from(["SGD", "Adam", "AdamW"]))
    decay = draw(st.sampled_from([0.0, 0.1, 0.5]))
    if kind == "SGD":
        momentum = draw(st.sampled_from([0.0, 0.9]))
        nesterov = momentum > 0 and draw(st.booleans())
        dampening = 0.0 if nesterov or momentum == 0 else draw(st.sampled_from([0.0, 0.3]))
        return kind, {"momentum": momentum, "nesterov": nesterov, "dampening": dampening, "weight_decay": decay}
    return kind, {"betas": (draw(st.sampled_from([0.0, 0.9])), 0.99), "eps": 1e-8, "weight_decay": decay}


def make(kind: str, options: dict, lr: float, grouped: bool, model: nn.Module) -> optim.Optimizer:
    cls = getattr(optim, kind)
    if not grouped:
        return cls(lr=lr, **options)
    first, *rest = model.parameters()
    # a group with its own rate: a schedule scales it by the same factor as the default's
    return cls([{"params": [first], "lr": 3 * lr}, {"params": rest}], lr=lr, **options)


def problem(seed: int) -> tuple[nn.Module, mta.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 3, dtype="float64", rng=rng), nn.Tanh(), nn.Linear(3, 2, dtype="float64",
                                                                                          rng=rng))
    return model, mta.tensor(rng.normal(size=(6, 4)), dtype="float64"), rng.integers(0, 2, 6)


def step(opt: optim.Optimizer, model: nn.Module, x: mta.Tensor, y: np.ndarray, lr: float | None) -> list[np.ndarray]:
    before = [p.numpy().copy() for p in model.parameters()]
    opt.step(model, F.cross_entropy(model(x), y).backward(), lr=lr)
    return [p.numpy() - b for p, b in zip(model.parameters(), before, strict=True)]


@given(config=optimizers(), grouped=st.booleans(), first=st.floats(0.01, 0.2), second=st.floats(0.01, 0.2),
       factor=st.sampled_from([0.25, 3.0]), seed=st.integers(0, 100))
def test_a_steps_displacement_is_proportional_to_its_scheduled_rate(config: tuple[str, dict], grouped: bool,
                                                                    first: float, second: float, factor: float,
                                                                    seed: int) -> None:
    kind, options = config
    runs = []
    for rate in (second, factor * second):  # two identical runs, the same first step, then two rates
        model, x, y = problem(seed)
        opt = make(kind, options, BASE_LR, grouped, model)
        step(opt, model, x, y, lr=first)  # leaves momentum, moments and a step count behind
        runs.append(step(opt, model, x, y, lr=rate))
    moved, scaled = runs
    scale = max(float(np.max(np.abs(p.numpy()))) for p in model.parameters())
    for a, b in zip(moved, scaled, strict=True):
        assert np.max(np.abs(factor * a - b)) <= 1e-12 * scale


@given(config=optimizers(), grouped=st.booleans(), rates=st.lists(st.floats(0.01, 0.2), min_size=1, max_size=3),
       seed=st.integers(0, 100))
def test_a_scheduled_step_is_the_step_of_an_optimizer_made_with_that_rate(config: tuple[str, dict], grouped: bool,
                                                                          rates: list[float], seed: int) -> None:
    kind, options = config
    scheduled_model, x, y = problem(seed)
    plain_model, _, _ = problem(seed)
    scheduled = make(kind, options, BASE_LR, grouped, scheduled_model)
    plain = make(kind, options, rates[0], grouped, plain_model)
    for rate in rates:
        for group, base_group in zip(plain.param_groups, scheduled.param_groups, strict=True):
            group["lr"] = base_group["lr"] * (rate / BASE_LR)  # the rate a scheduler hands that group
        step(scheduled, scheduled_model, x, y, lr=rate)
        step(plain, plain_model, x, y, lr=None)
    for a, b in zip(scheduled_model.parameters(), plain_model.parameters(), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14, atol=1e-15)

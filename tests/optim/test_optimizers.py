"""Optimizers against their update rules written out in NumPy (float64), plus state and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.nn import functional as F


def quadratic_problem(seed: int = 0) -> tuple[nn.Module, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 3, dtype="float64", rng=rng))
    x = rng.normal(size=(6, 4))
    y = rng.normal(size=(6, 3))
    return model, x, y


def grads_of(model: nn.Module, x: np.ndarray, y: np.ndarray) -> mta.Gradients:
    return F.mse_loss(model(mta.tensor(x, dtype="float64")), y).backward()


def run(opt: optim.Optimizer, steps: int = 3, seed: int = 0) -> tuple[list, list, list]:
    """Initial parameters, the gradients of each step, and the final parameters."""
    model, x, y = quadratic_problem(seed)
    initial = [p.numpy() for p in model.parameters()]
    history = []
    for _ in range(steps):
        grads = grads_of(model, x, y)
        history.append([np.array(grads[p]) for p in model.parameters()])
        model = opt.step(model, grads)
    return initial, history, [p.numpy() for p in model.parameters()]


@pytest.mark.parametrize(("mu", "nesterov", "dampening"), [(0.9, False, 0.0), (0.9, True, 0.0), (0.9, False, 0.5),
                                                        (0.0, False, 0.5)])
def test_sgd_momentum_matches_its_rule(mu: float, nesterov: bool, dampening: float) -> None:
    # PyTorch's rule: the buffer starts as the first step's d (undamped); without momentum there
    # is no buffer, and dampening changes nothing
    lr, wd = 0.1, 0.01
    initial, history, final = run(optim.SGD(lr, momentum=mu, weight_decay=wd, nesterov=nesterov,
                                            dampening=dampening))
    params = [p.copy() for p in initial]
    bufs = [None] * len(params)
    for grads in history:
        for i, g in enumerate(grads):
            d = g + wd * params[i]
            if mu == 0.0:
                step = d
            else:
                bufs[i] = d.copy() if bufs[i] is None else mu * bufs[i] + (1 - dampening) * d
                step = d + mu * bufs[i] if nesterov else bufs[i]
            params[i] = params[i] - lr * step
    for got, want in zip(final, params, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_adam_family_matches_its_rule(cls: type) -> None:
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.99, 1e-8, 0.05
    initial, history, final = run(cls(lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd))
    params = [p.copy() for p in initial]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(history, start=1):
        for i, g in enumerate(grads):
            if cls is optim.AdamW:
                params[i] = params[i] * (1 - lr * wd)
            else:
                g = g + wd * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat = m[i] / (1 - b1**t)
            v_hat = v[i] / (1 - b2**t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    for got, want in zip(final, params, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_step_returns_the_same_model_and_updates_in_place() -> None:
    model, x, y = quadratic_problem()
    params = model.parameters()
    out = optim.SGD(0.1).step(model, grads_of(model, x, y))
    assert out is model and model.parameters()[0] is params[0]


def test_state_is_kept_by_parameter_name_and_round_trips() -> None:
    model, x, y = quadratic_problem()
    opt = optim.AdamW(lr=0.01)
    opt.step(model, grads_of(model, x, y))
    assert set(opt.state) == {"0.weight", "0.bias"}
    saved = opt.state_dict()
    twin_model, _, _ = quadratic_problem()
    twin_model.load_record(model.to_record())
    twin = optim.AdamW(lr=0.5)
    twin.load_state_dict(saved, model=twin_model)
    assert twin.lr == 0.01 and twin.step_count == 1
    grads = grads_of(model, x, y)
    opt.step(model, grads)
    twin.step(twin_model, grads_of(twin_model, x, y))
    for a, b in zip(model.parameters(), twin_model.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="names parameter 'bogus'"):
        optim.AdamW().load_state_dict({"step_count": 1, "state": {"bogus": {}}}, model=twin_model)


def test_bf16_parameters_update_through_a_float32_master_copy() -> None:
    layer = nn.Linear(3, 2).to(dtype="bfloat16")
    x = mta.tensor(np.ones((2, 3)), dtype="bfloat16")
    opt = optim.SGD(1e-4)
    before = layer.weight.numpy().astype(np.float32)
    for _ in range(20):
        opt.step(layer, (layer(x).sum()).backward())
    master = opt.state["weight"]["master"]
    assert master.dtype == np.float32 and layer.weight.dtype == mta.bfloat16
    # 20 steps of 2e-4 are below bf16's resolution near 0.5, but the master copy keeps them
    np.testing.assert_allclose(master, before - 20 * 1e-4 * 2.0, rtol=1e-5)
    np.testing.assert_array_equal(layer.weight.numpy(), master.astype(mta.bfloat16))


def test_optimizer_errors() -> None:
    with pytest.raises(ValueError, match="lr must be a number >= 0"):
        optim.SGD(-0.1)
    with pytest.raises(ValueError, match=r"momentum must be in \[0.0, 1.0\)"):
        optim.SGD(0.1, momentum=1.5)
    with pytest.raises(ValueError, match="nesterov needs momentum"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"beta2 must be in \[0.0, 1.0\)"):
        optim.Adam(betas=(0.9, 1.0))
    model, _, _ = quadratic_problem()
    with pytest.raises(TypeError, match="expects a Gradients container or an Accumulator, got dict"):
        optim.SGD(0.1).step(model, {})


def test_clip_grad_norm_scales_to_the_limit() -> None:
    model, x, y = quadratic_problem()
    grads = grads_of(model, x, y)
    norm = math.sqrt(sum(float(np.sum(np.asarray(g) ** 2)) for g in grads.values()))
    returned = optim.clip_grad_norm(grads, max_norm=norm / 4)
    assert returned == pytest.approx(norm, rel=1e-6)
    assert optim.grad_norm(grads) == pytest.approx(norm / 4, rel=1e-5)
    unchanged = optim.clip_grad_norm(grads, max_norm=1e9)
    assert unchanged == pytest.approx(norm / 4, rel=1e-5)
    with pytest.raises(ValueError, match="max_norm must be positive"):
        optim.clip_grad_norm(grads, 0.0)


def test_schedulers_follow_their_formulas() -> None:
    from minitorch_accum.optim.lr_scheduler import ConstantLR, CosineAnnealingLR, LinearWarmupLR, StepLR

    assert [ConstantLR(0.1).step() for _ in range(2)] == [0.1, 0.1]
    warm = LinearWarmupLR(1.0, warmup_steps=4)
    assert [warm.step() for _ in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cosine = CosineAnnealingLR(1.0, total_steps=4, min_lr=0.0)
    np.testing.assert_allclose([cosine.step() for _ in range(5)], [1.0, 0.8535534, 0.5, 0.1464466, 0.0], atol=1e-7)
    step = StepLR(1.0, step_size=2, gamma=0.5)
    assert [step.step() for _ in range(5)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    resumed = StepLR(1.0, step_size=2, gamma=0.5)
    resumed.load_state_dict(step.state_dict())
    assert resumed.step() == step.step()
    with pytest.raises(ValueError, match="step_size must be positive"):
        StepLR(1.0, step_size=0)


@pytest.mark.parametrize("make", [lambda: optim.SGD(0.1, momentum=0.9), lambda: optim.AdamW(lr=0.01)])
def test_a_step_with_another_models_gradients_is_refused_and_not_counted(make) -> None:
    from minitorch_accum.accum import Accumulator

    rng = np.random.default_rng(0)
    trained = nn.Sequential(nn.Linear(3, 2, rng=rng))
    other = nn.Sequential(nn.Linear(3, 2, rng=rng))  # the same layout, other parameters
    acc = Accumulator(trained, steps=1)
    acc.backward(F.cross_entropy(trained(mta.ones(4, 3)), np.zeros(4, dtype=np.int64), reduction="sum"), num_items=4)
    grads = F.cross_entropy(trained(mta.ones(4, 3)), np.zeros(4, dtype=np.int64)).backward()
    opt = make()
    before = [p.numpy().copy() for p in other.parameters()]
    for source, kind in ((acc, "Accumulator"), (grads, "Gradients")):
        with pytest.raises(ValueError, match=rf"none of the 2 gradients of the {kind} belongs to a parameter of the "
                                             r"Sequential given \(2 parameters\)"):
            opt.step(other, source)
    assert opt.step_count == 0 and opt.state == {}
    assert all(np.array_equal(p.numpy(), b) for p, b in zip(other.parameters(), before, strict=True))
    opt.step(trained, acc)  # the window is still there for the model it belongs to
    assert opt.step_count == 1

"""Parameter groups PyTorch style, beside today's ``SGD(0.1)`` form; checked state loading."""

from __future__ import annotations

import json

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import kernels, nn, optim
from minitorch_accum.nn import functional as F


def problem(seed: int = 0) -> tuple[nn.Module, mta.Gradients]:
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(4, 3, dtype="float64", rng=rng), nn.Tanh(), nn.Linear(3, 2, dtype="float64",
                                                                                          rng=rng))
    x, y = rng.normal(size=(6, 4)), rng.normal(size=(6, 2))
    return model, F.mse_loss(model(mta.tensor(x, dtype="float64")), y).backward()


def after_steps(make: object, steps: int = 3) -> list[np.ndarray]:
    """The parameters after ``steps`` updates with gradients that do not depend on them, so
    each parameter's path depends on its own hyperparameters only."""
    model, _ = problem()
    opt = make(model)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        grads = mta.Gradients()
        for p in model.parameters():
            grads[p] = rng.normal(size=p.shape)
        opt.step(model, grads)
    return [p.numpy() for p in model.parameters()]


def decay_groups(model: nn.Module, decay: float) -> list[dict]:
    weights = [p for n, p in model.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in model.named_parameters() if n.endswith("bias")]
    return [{"params": weights, "weight_decay": decay}, {"params": biases, "weight_decay": 0.0}]


def test_groups_take_their_own_hyperparameters() -> None:
    grouped = after_steps(lambda m: optim.AdamW(decay_groups(m, 0.1), lr=0.01))
    all_decay = after_steps(lambda m: optim.AdamW(lr=0.01, weight_decay=0.1))
    no_decay = after_steps(lambda m: optim.AdamW(lr=0.01, weight_decay=0.0))
    for i, got in enumerate(grouped):  # Adam's update is per parameter: each matches its own rule
        np.testing.assert_array_equal(got, (all_decay if i % 2 == 0 else no_decay)[i])
    assert not np.array_equal(all_decay[0], no_decay[0])


def test_pytorch_and_todays_forms_agree_when_every_parameter_is_given() -> None:
    today = after_steps(lambda m: optim.SGD(0.1, momentum=0.9))
    for make in (lambda m: optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
                 lambda m: optim.SGD([{"params": m.parameters()}], 0.1, momentum=0.9),
                 lambda m: optim.SGD(params=list(m.parameters()), lr=0.1, momentum=0.9)):
        for a, b in zip(after_steps(make), today, strict=True):
            np.testing.assert_array_equal(a, b)


def test_a_parameter_in_no_group_is_not_updated_and_gets_no_state() -> None:
    model, grads = problem()
    frozen = model[0].weight
    before = frozen.numpy()
    opt = optim.AdamW([p for p in model.parameters() if p is not frozen], lr=0.1)
    opt.step(model, grads)
    np.testing.assert_array_equal(frozen.numpy(), before)
    assert "0.weight" not in opt.state and "0.bias" in opt.state


def test_step_lr_scales_every_group_like_a_pytorch_scheduler() -> None:
    model, grads = problem()
    before = [p.numpy() for p in model.parameters()]
    groups = [{"params": model[0].parameters(), "lr": 0.2}, {"params": model[2].parameters()}]
    opt = optim.SGD(groups, lr=0.1)
    opt.step(model, grads, lr=0.05)  # half the base rate: every group at half its own
    rates = [0.1, 0.1, 0.05, 0.05]
    for p, b, rate in zip(model.parameters(), before, rates, strict=True):
        np.testing.assert_allclose(p.numpy(), b - rate * grads[p], rtol=1e-15)


def test_param_groups_read_and_write_like_pytorchs() -> None:
    model, grads = problem()
    opt = optim.SGD(decay_groups(model, 0.01), lr=0.1)
    assert [len(g["params"]) for g in opt.param_groups] == [2, 2]
    assert opt.param_groups[0]["weight_decay"] == 0.01 and opt.param_groups[1]["lr"] == 0.1
    assert set(opt.param_groups[0]) == {"params", *optim.SGD.hyperparameter_names}
    opt.param_groups[1]["lr"] = -0.5  # a group's own rate, changed in place, takes effect...
    with pytest.raises(ValueError, match=r"lr must be a number >= 0, got -0\.5"):
        opt.step(model, grads)  # ...and is checked as the constructor checks it
    opt.lr = 0.3  # on the optimizer: the default and every group
    assert opt.lr == 0.3 and [g["lr"] for g in opt.param_groups] == [0.3, 0.3]
    implicit = optim.AdamW(lr=0.01)
    assert implicit.param_groups == [{"params": None, "lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8,
                                      "weight_decay": 0.01}]


def test_one_fused_launch_per_group_and_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = kernels.multi_adamw_step

    def counting(params: list, *args: object, **kwargs: object) -> None:
        calls.append(len(params))
        real(params, *args, **kwargs)

    monkeypatch.setattr(kernels, "multi_adamw_step", counting)
    model = nn.Sequential(nn.Linear(2, 2, dtype="float64"), nn.Linear(2, 2, dtype="float32"),
                          nn.Linear(2, 2, dtype="float64"))
    grads = mta.Gradients()
    for p in model.parameters():
        grads[p] = np.ones(p.shape, dtype=p.dtype)
    optim.AdamW([{"params": model[0].parameters()}, {"params": [*model[1].parameters(), *model[2].parameters()],
                 "weight_decay": 0.0}]).step(model, grads)
    assert sorted(calls) == [2, 2, 2]  # group 0 (float64), group 1 float32, group 1 float64


def test_state_dict_round_trips_groups_through_json() -> None:
    model, grads = problem()
    opt = optim.AdamW(decay_groups(model, 0.1), lr=0.01, betas=(0.8, 0.99))
    opt.step(model, grads)
    saved = opt.state_dict()
    hyper = json.loads(json.dumps(saved["hyperparameters"]))  # what a checkpoint's JSON keeps
    assert hyper["param_groups"][0]["params"] == [0, 1] and hyper["param_groups"][1]["params"] == [2, 3]
    twin_model, _ = problem()
    twin = optim.AdamW(decay_groups(twin_model, 0.5), lr=0.5)
    twin.load_state_dict({**saved, "hyperparameters": hyper}, model=twin_model)
    assert twin.lr == 0.01 and twin.betas == (0.8, 0.99)
    assert [g["weight_decay"] for g in twin.param_groups] == [0.1, 0.0]
    assert twin.param_groups[0]["params"][0] is twin_model[0].weight
    with pytest.raises(ValueError, match=r"parameter groups of sizes \[2, 2\] .*, this optimizer \[4\]"):
        optim.AdamW(twin_model.parameters()).load_state_dict(saved)
    old_style = {"step_count": 1, "state": {}, "hyperparameters": {"lr": 0.2, "weight_decay": 0.3}}
    twin.load_state_dict(old_style)  # saved without groups: applies to every group
    assert [(g["lr"], g["weight_decay"]) for g in twin.param_groups] == [(0.2, 0.3), (0.2, 0.3)]


def test_load_state_dict_rejects_unknown_and_invalid_hyperparameters_and_changes_nothing() -> None:
    opt = optim.AdamW(lr=0.01)
    good = opt.state_dict()
    with pytest.raises(ValueError, match=r"AdamW.load_state_dict: unknown hyperparameter\(s\) step, zero_grad; "
                                         r"AdamW has lr, betas, eps, weight_decay"):
        opt.load_state_dict({**good, "hyperparameters": {"lr": 0.5, "step": 3, "zero_grad": None}})
    with pytest.raises(ValueError, match=r"beta1 must be in \[0.0, 1.0\), got 1.0"):
        opt.load_state_dict({**good, "hyperparameters": {"betas": [1.0, 0.999]}})
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) momentum in parameter group 0"):
        opt.load_state_dict({**good, "hyperparameters": {"param_groups": [{"params": None, "momentum": 0.9}]}})
    with pytest.raises(ValueError, match="the state lacks step_count"):
        opt.load_state_dict({"state": {}})
    assert opt.lr == 0.01 and opt.betas == (0.9, 0.999) and opt.state_dict() == good


@pytest.mark.parametrize("betas", [(1.0, 0.999), (0.9, 1.0), (-0.1, 0.9), (float("nan"), 0.9), ("a", 0.9)])
def test_adam_rejects_betas_outside_zero_one(betas: tuple) -> None:
    for cls in (optim.Adam, optim.AdamW):
        with pytest.raises(ValueError, match=r"beta[12] must be"):
            cls(lr=0.1, betas=betas)
    with pytest.raises(ValueError, match="betas must be a pair"):
        optim.Adam(betas=(0.9,))


def test_constructor_errors_name_the_problem() -> None:
    model, _ = problem()
    with pytest.raises(TypeError, match="SGD: got a learning rate twice"):
        optim.SGD(0.1, lr=0.2)
    with pytest.raises(TypeError, match="SGD: lr is required"):
        optim.SGD(model.parameters())
    with pytest.raises(TypeError, match=r"got a Sequential; pass model\.parameters\(\)"):
        optim.AdamW(model)
    with pytest.raises(ValueError, match="AdamW: got an empty parameter list"):
        optim.AdamW([])
    with pytest.raises(ValueError, match=r"a Param of shape \(4, 3\) appears in more than one parameter group"):
        optim.AdamW([{"params": model.parameters()}, {"params": [model[0].weight]}])
    with pytest.raises(TypeError, match="item 1 of a parameter group is a str, not a Param"):
        optim.SGD([model[0].weight, "bias"], lr=0.1)
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) momentum in a parameter group"):
        optim.AdamW([{"params": model.parameters(), "momentum": 0.9}])
    with pytest.raises(ValueError, match="takes no parameter groups"):
        optim.AdamW(lr=0.1).add_param_group({"params": model.parameters()})

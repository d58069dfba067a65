"""Every way a hyperparameter reaches an optimizer refuses NaN and infinities, naming it: the
constructors, parameter groups, assignment, ``step(lr=...)`` and ``load_state_dict``."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.nn import functional as F

NON_FINITE = [float("nan"), float("inf"), -float("inf"), np.float32("nan"), np.float64("inf")]


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 2, rng=np.random.default_rng(0)))


@pytest.mark.parametrize("bad", NON_FINITE, ids=repr)
@pytest.mark.parametrize("make, name", [
    (lambda v: optim.SGD(v), "lr"),
    (lambda v: optim.SGD(0.1, momentum=v), "momentum"),
    (lambda v: optim.SGD(0.1, weight_decay=v), "weight_decay"),
    (lambda v: optim.SGD(0.1, dampening=v), "dampening"),
    (lambda v: optim.AdamW(lr=v), "lr"),
    (lambda v: optim.AdamW(lr=0.1, eps=v), "eps"),
    (lambda v: optim.AdamW(lr=0.1, weight_decay=v), "weight_decay"),
    (lambda v: optim.Adam(lr=0.1, betas=(0.9, v)), "beta2"),
], ids=["sgd-lr", "sgd-momentum", "sgd-weight_decay", "sgd-dampening", "adamw-lr", "adamw-eps",
        "adamw-weight_decay", "adam-beta2"])
def test_constructors_refuse_non_finite_hyperparameters(make, name: str, bad: float) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        make(bad)


@pytest.mark.parametrize("bad", NON_FINITE, ids=repr)
def test_groups_assignment_step_and_load_refuse_non_finite_values(bad: float) -> None:
    model = _model()
    with pytest.raises(ValueError, match=r"^lr must be"):
        optim.SGD([{"params": model.parameters(), "lr": bad}], lr=0.1)
    with pytest.raises(ValueError, match=r"^weight_decay must be"):
        optim.AdamW([{"params": model.parameters(), "weight_decay": bad}], lr=0.1)
    opt = optim.AdamW(lr=0.1)
    with pytest.raises(ValueError, match=r"^eps must be"):
        opt.eps = bad
    assert opt.eps == 1e-8
    grads = F.cross_entropy(model(mta.ones(4, 3)), np.zeros(4, dtype=np.int64)).backward()
    before = [p.numpy().copy() for p in model.parameters()]
    with pytest.raises(ValueError, match=r"^lr must be"):
        opt.step(model, grads, lr=bad)
    assert opt.step_count == 0 and all(np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before,
                                                                                       strict=True))
    good = opt.state_dict()
    with pytest.raises(ValueError, match=r"^lr must be"):
        opt.load_state_dict({**good, "hyperparameters": {"lr": bad}})
    with pytest.raises(ValueError, match=r"^weight_decay must be"):
        opt.load_state_dict({**good, "hyperparameters": {"param_groups": [{"params": None, "weight_decay": bad}]}})
    assert opt.state_dict() == good


def test_nesterov_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match=r"^nesterov must be True or False, got nan"):
        optim.SGD(0.1, momentum=0.9, nesterov=float("nan"))
    with pytest.raises(ValueError, match=r"^nesterov must be True or False, got 'yes'"):
        optim.SGD(0.1, momentum=0.9, nesterov="yes")
    assert optim.SGD(0.1, momentum=0.9, nesterov=np.bool_(True)).nesterov is True

"""The Optimizer base class (``optim/optimizer.py``): what every optimizer inherits, the checks of
its arguments with their messages, its counters and its state's round trips."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.optim.grad_source import GradientWindow


class SignDescent(optim.Optimizer):
    """A rule that only writes ``_update`` and ``state_slots``: p -= lr * sign(g)."""

    def state_slots(self) -> int:
        return 0

    def _update(self, entries: list, settings: dict, grad_scale: float) -> None:
        for _, param, grad in entries:
            param.data = param.data - settings["lr"] * np.sign(grad * grad_scale)


class SkippedWindow:
    """A gradient source whose window saw a non-finite gradient (the step must not run)."""

    def gradient_window(self) -> GradientWindow:
        return GradientWindow(skip=True)


class WindowOf:
    """A gradient source offering the given arrays (by parameter id) as its window."""

    def __init__(self, arrays: dict) -> None:
        self.arrays = arrays

    def gradient_window(self) -> GradientWindow:
        return GradientWindow(dict(self.arrays))


def model_and_grads(seed: int = 0) -> tuple[nn.Module, mta.Gradients]:
    """Three float64 layers and gradients for them that do not depend on the parameters."""
    rng = np.random.default_rng(seed)
    model = nn.Sequential(nn.Linear(3, 2, dtype="float64", rng=rng), nn.Linear(2, 2, dtype="float64", rng=rng),
                          nn.Linear(2, 1, dtype="float64", rng=rng))
    return model, same_grads(model, grads_rng=np.random.default_rng(seed + 1))


def same_grads(model: nn.Module, grads_rng: np.random.Generator | None = None) -> mta.Gradients:
    """The gradients ``model_and_grads`` gives, for another model of the same layout."""
    rng = grads_rng or np.random.default_rng(1)
    grads = mta.Gradients()
    for p in model.parameters():
        grads[p] = rng.normal(size=p.shape)
    return grads


def test_a_subclass_that_writes_only_its_rule_gets_its_rate_checked_read_and_applied() -> None:
    with pytest.raises(ValueError, match=r"^lr must be a number >= 0, got -1$"):
        SignDescent(None, {"lr": -1})
    with pytest.raises(ValueError, match=r"^lr must be a number, got None$"):
        SignDescent(None, {"lr": None})
    opt = SignDescent(None, {"lr": 0.5})
    assert opt.lr == 0.5 and opt.param_groups == [{"params": None, "lr": 0.5}]
    model, grads = model_and_grads()
    before = [p.numpy() for p in model.parameters()]
    opt.step(model, grads)
    for p, b in zip(model.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.numpy(), b - 0.5 * np.sign(grads[p]))


def test_wrong_params_arguments_say_what_to_pass() -> None:
    model, _ = model_and_grads()
    with pytest.raises(TypeError, match=r"^SGD: params must be an iterable of Params or of parameter-group dicts, "
                                        r"got a Param; wrap it in a list$"):
        optim.SGD(model[0].weight, lr=0.1)
    with pytest.raises(ValueError, match=r"^SGD: a parameter group needs a 'params' entry, got keys \['lr'\]$"):
        optim.SGD([{"lr": 0.1}], lr=0.1)
    with pytest.raises(ValueError, match=r"^AdamW: unknown hyperparameter\(s\) dampening, momentum in a parameter "
                                         r"group; known: lr, betas, eps, weight_decay$"):
        optim.AdamW([{"params": model.parameters(), "momentum": 0.9, "dampening": 0.1}])
    with pytest.raises(ValueError, match=r"^AdamW: was made without params \(it updates every parameter of the "
                                         r"model\); it takes no parameter groups$"):
        optim.AdamW(lr=0.1).add_param_group({"params": model.parameters()})
    with pytest.raises(ValueError, match=r"^SGD: a Param of shape \(3, 2\) appears in more than one parameter "
                                         r"group$"):
        optim.SGD([{"params": [model[0].weight, model[0].weight]}], lr=0.1)  # twice in one group too


def test_a_groups_params_may_be_one_param_as_in_pytorch() -> None:
    model, grads = model_and_grads()
    weight = model[0].weight
    before = [p.numpy() for p in model.parameters()]
    opt = optim.SGD([{"params": weight}], lr=0.1)
    assert opt.param_groups[0]["params"] == [weight]
    opt.step(model, grads)
    for p, b in zip(model.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.numpy(), b - 0.1 * grads[p] if p is weight else b)


def test_an_unknown_attribute_is_named_and_an_optimizer_copies_and_pickles() -> None:
    opt = optim.SGD(0.1, momentum=0.9)
    with pytest.raises(AttributeError, match=r"^SGD has no attribute 'momentun'$"):
        opt.momentun  # noqa: B018
    model, grads = model_and_grads()
    opt.step(model, grads)
    twins = [copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))]
    opt.step(model, grads)
    for twin in twins:
        assert twin.momentum == 0.9 and twin.step_count == 1
        twin_model, _ = model_and_grads()
        optim.SGD(0.1, momentum=0.9).step(twin_model, same_grads(twin_model))  # the first step again
        twin.step(twin_model, same_grads(twin_model))  # then the copy's, from the copied momentum
        for a, b in zip(twin_model.parameters(), model.parameters(), strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_group_positions_number_the_parameters_in_group_order_as_pytorch_does() -> None:
    model, _ = model_and_grads()
    opt = optim.SGD([{"params": layer.parameters()} for layer in model], lr=0.1)
    assert [g["params"] for g in opt.hyperparameters()["param_groups"]] == [[0, 1], [2, 3], [4, 5]]


def test_group_index_says_which_group_updates_a_param() -> None:
    model, _ = model_and_grads()
    grouped = optim.SGD([{"params": model[0].parameters()}, {"params": model[2].parameters()}], lr=0.1)
    assert [grouped.group_index(p) for p in model.parameters()] == [0, 0, None, None, 1, 1]
    single = optim.SGD(model[1].parameters(), lr=0.1)
    assert [single.group_index(p) for p in model.parameters()] == [None, None, 0, 0, None, None]
    assert {optim.SGD(0.1).group_index(p) for p in model.parameters()} == {0}


def test_steps_and_skipped_windows_are_counted_and_kept_by_the_state() -> None:
    model, grads = model_and_grads()
    opt = optim.AdamW(lr=0.01)
    for _ in range(2):
        opt.step(model, grads)
    before = [p.numpy() for p in model.parameters()]
    for _ in range(3):
        assert opt.step(model, SkippedWindow()) is model
    assert all(np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before, strict=True))
    assert (opt.step_count, opt.skipped_steps) == (2, 3)
    saved = opt.state_dict()
    twin = optim.AdamW(lr=0.01)
    twin.load_state_dict(saved, model=model)
    assert (twin.step_count, twin.skipped_steps) == (2, 3)
    twin.load_state_dict({"step_count": 4, "state": {}})  # a state saved before skipped steps were counted
    assert (twin.step_count, twin.skipped_steps) == (4, 0)


def test_update_takes_entries_with_the_gradients_as_they_are() -> None:
    model, grads = model_and_grads()
    stepped, _ = model_and_grads()
    optim.SGD(0.1).step(stepped, same_grads(stepped))
    opt = optim.SGD(0.1)
    opt.update([[(name, p, grads[p]) for name, p in model.named_parameters()]])
    for a, b in zip(model.parameters(), stepped.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match=r"^SGD.update: got 2 lists of entries for 1 parameter groups$"):
        opt.update([[], []])


def test_a_group_without_gradients_does_not_stop_the_groups_after_it() -> None:
    model, all_grads = model_and_grads()
    grads = mta.Gradients()
    for p in model[2].parameters():
        grads[p] = all_grads[p]
    before = [p.numpy() for p in model.parameters()]
    optim.SGD([{"params": layer.parameters()} for layer in model], lr=0.1).step(model, grads)
    for i, (p, b) in enumerate(zip(model.parameters(), before, strict=True)):
        np.testing.assert_array_equal(p.numpy(), b - 0.1 * all_grads[p] if i >= 4 else b)


def test_a_scheduled_rate_is_the_rate_itself_when_the_group_has_the_default() -> None:
    # 0.1 * (0.11 / 0.1) is 0.10999999999999999: the rate handed in must not go through the ratio
    model, grads = model_and_grads()
    made_with, _ = model_and_grads()
    assert 0.1 * (0.11 / 0.1) != 0.11
    optim.SGD(0.1).step(model, grads, lr=0.11)
    optim.SGD(0.11).step(made_with, same_grads(made_with))
    for a, b in zip(model.parameters(), made_with.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_zero_grad_says_what_to_do_instead() -> None:
    with pytest.raises(TypeError) as raised:
        optim.AdamW().zero_grad()
    assert str(raised.value) == (
        "AdamW.zero_grad(): there is nothing to zero: gradients are values here, not state of the parameters or "
        "the optimizer (Burn's design). Each loss.backward() returns a new Gradients container (step with it, then "
        "drop it); an Accumulator starts its next window with acc.zero() after model = opt.step(model, acc), and "
        "its first backward then overwrites rather than adds")


def test_a_gradient_of_another_shape_is_refused_naming_it() -> None:
    model, _ = model_and_grads()
    grads = WindowOf({id(model[0].weight): np.ones((2, 3))})
    with pytest.raises(ValueError, match=r"^optimizer: gradient for 0.weight has shape \(2, 3\), parameter has "
                                         r"\(3, 2\)$"):
        optim.SGD(0.1).step(model, grads)


def test_the_state_keeps_counts_as_numbers_and_hyperparameters_as_json_does() -> None:
    model, grads = model_and_grads()
    opt = optim.AdamW(lr=0.01)
    opt.step(model, grads)
    saved = opt.state_dict()
    assert type(saved["state"]["0.weight"]["step"]) is int
    assert isinstance(saved["state"]["0.weight"]["exp_avg"], np.ndarray)
    assert saved["hyperparameters"] == json.loads(json.dumps(saved["hyperparameters"]))  # what a checkpoint keeps


def test_a_state_loads_without_a_model_and_a_state_that_lacks_keys_is_named() -> None:
    model, grads = model_and_grads()
    opt = optim.SGD(0.1, momentum=0.9)
    opt.step(model, grads)
    twin = optim.SGD(0.1, momentum=0.9)
    twin.load_state_dict(opt.state_dict())
    assert set(twin.state) == set(opt.state)
    for name, slots in opt.state.items():
        np.testing.assert_array_equal(twin.state[name]["momentum_buffer"], slots["momentum_buffer"])
    with pytest.raises(ValueError, match=r"^SGD.load_state_dict: the state lacks step_count, state$"):
        twin.load_state_dict({})


@pytest.mark.parametrize("make", [
    lambda m: optim.SGD(0.1),
    lambda m: optim.SGD(0.1, momentum=0.9),
    lambda m: optim.SGD([{"params": m[0].parameters(), "momentum": 0.9}, {"params": m[1].parameters()}], lr=0.1),
    lambda m: optim.SGD([{"params": m[0].parameters()}, {"params": m[1].parameters(), "momentum": 0.5}], lr=0.1),
    lambda m: optim.Adam(lr=0.1),
    lambda m: optim.AdamW([{"params": m[0].parameters()}, {"params": m[2].parameters(), "lr": 0.5}]),
], ids=["sgd", "sgd-momentum", "sgd-momentum-in-group-0", "sgd-momentum-in-group-1", "adam", "adamw-groups"])
def test_the_slots_an_optimizer_declares_are_the_arrays_it_keeps(make) -> None:
    model, grads = model_and_grads()
    opt = make(model)
    planned = opt.state_slots()  # before the first step: what memory planning reads
    for _ in range(2):
        opt.step(model, grads)
    kept = {}
    for name, p in model.named_parameters():
        group = opt.group_index(p)
        if group is None:
            assert name not in opt.state
            continue
        arrays = {key for key, value in opt.state.get(name, {}).items() if hasattr(value, "shape")}
        assert arrays == set(opt.state_array_slots(opt.param_groups[group]))
        kept[name] = len(arrays)
    assert planned == max(kept.values())


@pytest.mark.parametrize("make", [lambda: optim.Adam(lr=0.1), lambda: optim.AdamW(lr=0.1),
                                  lambda: optim.SGD(lr=0.1, momentum=0.9)], ids=["adam", "adamw", "sgd-momentum"])
@pytest.mark.parametrize("with_model", [True, False], ids=["with-model", "without-model"])
def test_steps_after_loading_a_state_leave_the_loaded_state_as_it_was(make, with_model: bool) -> None:
    model = nn.Linear(3, 2, dtype="float64", rng=np.random.default_rng(0))
    x = mta.tensor(np.random.default_rng(1).normal(size=(4, 3)), dtype="float64")
    first = make()
    model = first.step(model, (model(x) ** 2).sum().backward())
    saved = first.state_dict()
    kept = {name: {k: np.array(v, copy=True) for k, v in slots.items() if isinstance(v, np.ndarray)}
            for name, slots in saved["state"].items()}
    assert kept and all(kept.values())
    resumed = make()
    resumed.load_state_dict(saved, model if with_model else None)
    for _ in range(2):
        model = resumed.step(model, (model(x) ** 2).sum().backward())
    for name, slots in kept.items():
        for key, before in slots.items():
            np.testing.assert_array_equal(saved["state"][name][key], before, err_msg=f"{name}/{key}")
    # and the resumed optimizer did move on from the loaded state
    moved = resumed.state_dict()["state"]
    assert any(not np.array_equal(moved[n][k], v) for n, s in kept.items() for k, v in s.items())

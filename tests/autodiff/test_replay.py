"""Capture and replay (autodiff/replay.py): what a replayed call does as an eager one would, the
guards that decide when it may replay, and the faults graph reuse had, each refused here.

Graph reuse, which this replaced, accepted an optimizer step between a replayed forward and its
backward, doubled a gradient after an in-place edit of a weight, sent an alternating input's
gradient to the other weight, replayed a stale tensor instead of raising, kept every replaced
layer alive, and turned itself off for good after one forward that raised or had no backward.
"""

from __future__ import annotations

import functools
import gc
import tracemalloc
import warnings
import weakref
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator, MeanLossError
from minitorch_accum.autodiff import GraphFreedError, InPlaceModificationError, Replay, capture, detect_raw_writes
from minitorch_accum.nn import functional as F


class Switch(nn.Module):
    """Two Linears and a branch the module's state chooses."""

    def __init__(self, seed: int = 3) -> None:
        mta.manual_seed(seed)
        self.first = nn.Linear(6, 5, dtype="float64")
        self.second = nn.Linear(5, 4, dtype="float64")
        self.gelu = True

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        h = self.first(x)
        return self.second(h.gelu() if self.gelu else h.tanh())


class MaskedSum(nn.Module):
    """A Linear's output times an array the module holds (not a parameter), summed."""

    def __init__(self) -> None:
        self.layer = nn.Linear(6, 4, dtype="float64")
        self.mask = np.ones(4)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return (self.layer(x) * mta.from_numpy(self.mask)).sum()


def _x(rows: int = 3, seed: int = 0) -> mta.Tensor:
    return mta.tensor(np.random.default_rng(seed).normal(size=(rows, 6)))


def _grads(model: nn.Module, loss: mta.Tensor) -> dict[str, np.ndarray]:
    grads = loss.backward()
    return {n: np.array(grads[p]) for n, p in model.named_parameters() if p in grads}


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def _replaying(model: nn.Module, **options: Any) -> Replay:
    """A replay of ``model(x).sum()`` that has replayed once already."""
    step = capture(lambda x: model(x).sum(), model, **options)
    for seed in range(3):
        _grads(model, step(_x(seed=seed)))
    assert step.last is not None and step.last.outcome == "replayed"
    return step


# ---------------------------------------------------------------------- how calls run
def test_calls_are_captured_checked_then_replayed_and_say_so() -> None:
    model = Switch()
    heard = []
    step = capture(lambda x: model(x).sum(), model, listener=heard.append)
    eager = Switch()
    for seed in range(4):
        _same(_grads(eager, eager(_x(seed=seed)).sum()), _grads(model, step(_x(seed=seed))))
    assert [r.outcome for r in heard] == ["captured", "checked", "replayed", "replayed"]
    assert step.counts == {"captured": 1, "checked": 1, "replayed": 2, "eager": 0}
    assert "replayed=2" in repr(step)


def test_off_runs_every_call_eagerly() -> None:
    model = Switch()
    step = capture(lambda x: model(x).sum(), model, enabled=False)
    for _ in range(3):
        step(_x())
    assert step.counts["eager"] == 3 and step.last.reason == "replay is off"


def test_a_value_computed_in_python_from_the_inputs_is_refused_naming_the_op_once() -> None:
    model = Switch()

    def mean_loss(x: mta.Tensor, y: np.ndarray) -> mta.Tensor:
        per_item = F.cross_entropy(model(x), y, reduction="none")
        return per_item.sum() / float((y != 0).sum())  # the divisor counted in Python

    heard = []
    step = capture(mean_loss, model, listener=heard.append)
    eager = Switch()
    for seed, y in enumerate([np.array([1, 2, 0]), np.array([1, 2, 3]), np.array([0, 0, 3]), np.array([1, 1, 1])]):
        expected = _grads(eager, (F.cross_entropy(eager(_x(seed=seed)), y, reduction="none").sum()
                                  / float((y != 0).sum())))
        _same(expected, _grads(model, step(_x(seed=seed), y)))
    reports = step.counts
    assert reports == {"captured": 1, "checked": 0, "replayed": 0, "eager": 3}
    assert "op 6 (div)" in step.last.reason and "differed between two calls" in step.last.reason
    assert [r.first for r in heard] == [False, True, False, False]  # said once, by the first eager call


def test_a_value_computed_in_python_that_is_the_same_every_time_replays() -> None:
    model = Switch()
    step = capture(lambda x, y: F.cross_entropy(model(x), y, reduction="mean"), model)
    y = np.array([1, 2, 0])
    for seed in range(4):
        step(_x(seed=seed), y).backward()
    assert step.last.outcome == "replayed"


def test_what_cannot_be_replayed_runs_eagerly_and_says_why() -> None:
    model = Switch()
    outside = mta.tensor(np.ones(4), requires_grad=True)
    hidden = model(_x())  # made, with its graph, before the call
    cases = {
        "returns a int": lambda x: 3,
        "neither a tensor of the model nor an argument": lambda x: (model(x) * outside).sum(),
        "made by ops outside this call": lambda x: (model(x) + hidden).sum(),
        "type object is not one a guard can compare": None,
    }
    for why, fn in cases.items():
        step = capture(fn or (lambda x, anything: model(x).sum()), model)
        for _ in range(2):
            out = step(_x()) if fn is not None else step(_x(), object())
        assert step.last.outcome == "eager" and why in step.last.reason, (why, step.last)
        del out


def test_a_call_that_changes_the_model_is_not_replayed() -> None:
    model = Switch()

    def growing(x: mta.Tensor) -> mta.Tensor:
        model.calls = getattr(model, "calls", 0) + 1
        return model(x).sum()

    step = capture(growing, model)
    for _ in range(3):
        step(_x())
    assert step.last.outcome == "eager" and "changed the model's state" in step.last.reason
    assert model.calls == 3


def test_a_call_inside_another_capture_runs_eagerly_into_it() -> None:
    model = Switch()
    inner = capture(lambda x: model(x), model)
    outer = capture(lambda x: inner(x).sum(), model)
    eager = Switch()
    for seed in range(4):
        _same(_grads(eager, eager(_x(seed=seed)).sum()), _grads(model, outer(_x(seed=seed))))
    assert outer.last.outcome == "replayed" and inner.counts["eager"] == 2


# ---------------------------------------------------------------------- the guards
def test_another_shape_is_another_key_and_each_replays() -> None:
    model, eager = Switch(), Switch()
    step = capture(lambda x: model(x).sum(), model)
    shapes = [3, 3, 2, 3, 2, 2, 3]
    for seed, rows in enumerate(shapes):
        _same(_grads(eager, eager(_x(rows, seed)).sum()), _grads(model, step(_x(rows, seed))))
    assert step.counts == {"captured": 2, "checked": 2, "replayed": 3, "eager": 0}


def test_the_modules_state_is_part_of_the_key() -> None:
    model, eager = Switch(), Switch()
    step = _replaying(model)
    model.gelu = eager.gelu = False  # another branch: captured anew, never the gelu program
    for seed in range(3):
        _same(_grads(eager, eager(_x(seed=seed)).sum()), _grads(model, step(_x(seed=seed))))
    assert step.last.outcome == "replayed" and step.counts["captured"] == 2


def test_a_parameter_that_stops_requiring_grad_is_seen() -> None:
    model = Switch()
    step = _replaying(model)
    model.first.weight.requires_grad_(False)
    grads = _grads(model, step(_x()))
    assert "first.weight" not in grads and step.last.outcome == "captured"


def test_training_mode_is_part_of_the_key() -> None:
    mta.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8, dtype="float64"), nn.Dropout(0.5), nn.Linear(8, 2, dtype="float64"))
    step = capture(lambda x: model(x).sum(), model)
    x = _x()
    for _ in range(3):
        step(x)
    model.eval()
    values = {float(step(x).item()) for _ in range(3)}
    assert len(values) == 1 and step.last.outcome == "replayed"  # no dropout: every call the same
    model.train()
    assert step(x).item() not in values and step.last.outcome == "replayed"  # the training program again


def test_a_tensor_of_the_model_rebound_between_calls_is_read_afresh() -> None:
    model, eager = Switch(), Switch()
    step = _replaying(model)
    for m in (model, eager):
        m.first.weight.value = np.full((6, 5), 0.25)
        m.second.bias.data = np.arange(4.0)
    _same(_grads(eager, eager(_x()).sum()), _grads(model, step(_x())))
    assert step.last.outcome == "replayed"


# ---------------------------------------------------------------------- graph reuse's faults
def test_an_optimizer_step_between_a_replayed_forward_and_its_backward_is_refused() -> None:
    model = Switch()
    acc = Accumulator(model, steps=8, reduction="sum")
    step = acc.capture(lambda x: model(x).sum())
    for seed in range(3):
        acc.backward(step(_x(seed=seed)))
    loss = step(_x())
    assert step.last.outcome == "replayed"
    opt = optim.SGD(0.1)
    opt.step(model, acc)  # writes the weights the forward saved
    acc.zero()
    with pytest.raises(InPlaceModificationError, match=r"parameter '(first|second)\.weight'"):
        acc.backward(loss)


def test_a_raw_write_between_a_replayed_forward_and_its_backward_is_refused() -> None:
    model = Switch()
    step = _replaying(model)
    loss = step(_x())
    model.second.weight.data[1, 2] += 50.0
    with pytest.raises(InPlaceModificationError, match="checksum differs"):
        loss.backward()
    kept = capture(lambda x: model.first(x), model)
    for _ in range(3):
        hidden = kept(_x())
    with detect_raw_writes(True):  # the debug setting: a kept result's array too
        hidden = kept(_x())
        out = (hidden * hidden).sum()
        hidden.data[0, 0] = 7.0
        with pytest.raises(InPlaceModificationError):
            out.backward()
    assert kept.last.outcome == "replayed"


def test_an_in_place_edit_of_a_weight_between_micro_batches_is_computed_with_as_eagerly() -> None:
    model, eager = Switch(), Switch()
    step = _replaying(model)
    for m in (model, eager):
        m.first.weight.data *= 2.0  # in place: the replay must read the new values, once
        m.second.bias.data[...] = 0.5
    for seed in range(2):
        _same(_grads(eager, eager(_x(seed=seed)).sum()), _grads(model, step(_x(seed=seed))))
    assert step.last.outcome == "replayed"


def test_an_input_alternating_between_two_weights_sends_each_gradient_to_its_own() -> None:
    a = mta.tensor(np.full((6, 2), 1.0), requires_grad=True)
    b = mta.tensor(np.full((6, 2), -3.0), requires_grad=True)
    step = capture(lambda x, w: (x @ w).exp().sum())
    for turn in range(6):
        w = (a, b)[turn % 2]
        x = _x(seed=turn)
        grads = step(x, w).backward()
        assert set(grads) == {w}  # to this call's weight, not the one captured
        assert np.array_equal(grads[w], (x @ w).exp().sum().backward()[w])
    assert step.last.outcome == "replayed"


def test_arguments_that_share_an_array_at_the_capture_and_not_after_are_another_key() -> None:
    model = Switch()
    step = capture(lambda a, b: (model(a) * 2.0 + model(b)).sum(), model)
    shared, other = _x(seed=1), _x(seed=2)
    for _ in range(3):
        step(shared, shared).backward()  # captured, checked, replayed: both arguments one array
    eager = Switch()
    _same(_grads(eager, (eager(shared) * 2.0 + eager(other)).sum()), _grads(model, step(shared, other)))
    assert step.last.outcome == "captured"
    model_weight = model.first.weight
    through = capture(lambda x, w: (x @ w).sum(), model)
    for _ in range(3):
        through(_x(), model_weight)  # an argument that is the model's own tensor
    alone = mta.tensor(np.ones((6, 5)), requires_grad=True)
    assert set(through(_x(), alone).backward()) == {alone}


def test_a_layer_alternating_between_two_of_one_shape_is_read_as_eagerly() -> None:
    model, eager = Switch(), Switch()
    step = capture(lambda x: model(x).sum(), model)
    layers = [nn.Linear(6, 5, dtype="float64") for _ in range(2)]
    twins = [nn.Linear(6, 5, dtype="float64") for _ in range(2)]
    for layer, twin in zip(layers, twins, strict=True):
        twin.weight.value, twin.bias.value = layer.weight.numpy(), layer.bias.numpy()
    for turn in range(6):
        model.first, eager.first = layers[turn % 2], twins[turn % 2]
        _same(_grads(eager, eager(_x(seed=turn)).sum()), _grads(model, step(_x(seed=turn))))


def test_a_tensor_of_an_earlier_micro_batch_has_lost_its_graph_as_eagerly() -> None:
    model = Switch()
    step = _replaying(model)
    old = step(_x())
    old_sum = old
    old_sum.backward()
    new = step(_x(seed=1))
    assert step.last.outcome == "replayed"
    with pytest.raises(GraphFreedError):
        old.backward()
    with pytest.raises(GraphFreedError):
        (new + old).backward()
    new.backward()  # the failed backward freed nothing of the new graph


def test_a_tensor_of_an_earlier_call_without_backward_keeps_its_own_graph() -> None:
    model, eager = Switch(), Switch()
    step = _replaying(model)
    held = step(_x(seed=5))  # no backward yet
    later = step(_x(seed=6))
    _same(_grads(eager, eager(_x(seed=5)).sum()), _grads(model, held))
    _same(_grads(eager, eager(_x(seed=6)).sum()), _grads(model, later))


def test_replaced_layers_are_not_kept_alive() -> None:
    class Wide(nn.Module):
        def __init__(self) -> None:
            self.layer = nn.Linear(256, 256)

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return self.layer(x)

    model = Wide()
    step = capture(lambda x: model(x).sum(), model)
    x = mta.tensor(np.ones((2, 256), dtype=np.float32))
    gone = []
    gc.collect()
    tracemalloc.start()
    try:
        for turn in range(40):
            if turn:
                gone.append(weakref.ref(model.layer.weight))
                model.layer = nn.Linear(256, 256)
            for _ in range(3):
                step(x).backward()
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert all(ref() is None for ref in gone)
    assert held < 8 * 256 * 256 * 4  # one layer is 256 KiB; forty would be 10 MiB


def test_a_forward_that_raises_leaves_the_replay_as_it_was() -> None:
    model, eager = Switch(), Switch()

    def loss(x: mta.Tensor, y: np.ndarray) -> mta.Tensor:
        return F.cross_entropy(model(x), y, reduction="sum")

    step = capture(loss, model)
    y = np.array([0, 1, 2])
    for turn, bad in enumerate([True, False, True, False, False, True, False]):
        if bad:  # a target out of range: the op raises, in a capture as in a replay
            with pytest.raises(mta.OpError, match="out of range"):
                step(_x(seed=turn), np.array([0, 9, 2]))
            continue
        expected = _grads(eager, F.cross_entropy(eager(_x(seed=turn)), y, reduction="sum"))
        _same(expected, _grads(model, step(_x(seed=turn), y)))
    assert step.counts == {"captured": 1, "checked": 1, "replayed": 2, "eager": 0}


def test_a_forward_without_backward_leaves_the_replay_as_it_was() -> None:
    model, eager = Switch(), Switch()
    step = capture(lambda x: model(x).sum(), model)
    for turn in range(6):
        loss = step(_x(seed=turn))
        if turn % 2:
            _same(_grads(eager, eager(_x(seed=turn)).sum()), _grads(model, loss))
    assert step.counts["replayed"] == 4


# ---------------------------------------------------------------------- as a graph
def test_retain_graph_keeps_it_for_a_second_backward_as_eagerly() -> None:
    model = Switch()
    step = _replaying(model)
    loss = step(_x())
    first = loss.backward(retain_graph=True)
    second = loss.backward()
    for p in model.parameters():
        assert np.array_equal(first[p], second[p])
    with pytest.raises(GraphFreedError):
        loss.backward()


def test_an_eager_op_on_a_replayed_result_backpropagates_through_it() -> None:
    model, eager = Switch(), Switch()
    step = capture(lambda x: model(x), model)
    for seed in range(4):
        out = step(_x(seed=seed))
        _same(_grads(eager, (eager(_x(seed=seed)) * 3.0).tanh().sum()), _grads(model, (out * 3.0).tanh().sum()))
    assert step.last.outcome == "replayed"


def test_a_replayed_mean_loss_is_refused_by_an_items_window_as_eagerly() -> None:
    model = Switch()
    acc = Accumulator(model, steps=8)
    step = acc.capture(lambda x, y: F.cross_entropy(model(x), y, reduction="mean"))
    y = np.array([0, 1, 2])
    with pytest.raises(MeanLossError) as eagerly:
        acc.backward(F.cross_entropy(model(_x()), y, reduction="mean"), num_items=3)
    for seed in range(4):
        loss = step(_x(seed=seed), y)
        with pytest.raises(MeanLossError) as replayed:
            acc.backward(loss, num_items=3)
        assert str(replayed.value) == str(eagerly.value)  # "its last op is a sum of crossentropy divided by 3"
    assert step.last.outcome == "replayed"


def test_leaves_are_done_in_the_order_an_eager_backward_finishes_them() -> None:
    class Recording:
        fuses_gemm = True

        def __init__(self) -> None:
            self.events: list[tuple[str, int]] = []

        def accepts(self, leaf: Any) -> bool:
            return isinstance(leaf, nn.Param)

        def add(self, leaf: Any, grad: Any) -> None:
            self.events.append(("add", id(leaf)))

        def add_product(self, leaf: Any, a: Any, b: Any) -> None:
            self.events.append(("gemm", id(leaf)))

        def leaf_done(self, leaf: Any) -> None:
            self.events.append(("done", id(leaf)))

    model = Switch()
    step = _replaying(model)
    eager, replayed = Recording(), Recording()
    mta.autodiff.run_backward(model(_x()).sum(), sink=eager)
    mta.autodiff.run_backward(step(_x()), sink=replayed)
    assert replayed.events == eager.events and ("done", id(model.first.weight)) in eager.events


def test_the_guard_reads_tensors_lists_dicts_flags_and_numbers() -> None:
    class Holder(nn.Module):
        def __init__(self) -> None:
            self.blocks = [nn.Linear(2, 2), {"b": nn.Linear(2, 2)}]
            self.plain = mta.tensor(np.ones(2))
            self.scale = 0.5

    holder = Holder()
    tensors, state = holder.replay_state()
    assert {id(t) for t in tensors} == {id(p) for p in holder.parameters()} | {id(holder.plain)}
    holder.scale = 0.25
    assert holder.replay_state()[1] != state
    holder.scale = 0.5
    holder.blocks[1]["b"].eval()
    assert holder.replay_state()[1] != state


# ---------------------------------------------------------------------- what is replayed, exactly
class Tied(nn.Module):
    """A weight read as itself and, transposed, as a view that a matmul saves (a tied head)."""

    def __init__(self, dtype: str = "float32") -> None:
        mta.manual_seed(4)
        self.table = nn.Linear(6, 5, dtype=dtype)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        h = self.table(x)
        return (h * 2.0 + 1.0).tanh() @ self.table.weight.mT  # (rows, 5) @ (5, 6): the view is saved


def _twice(fn: Any, model: nn.Module, calls: int = 4, **options: Any) -> tuple[list[Any], list[Any], Replay]:
    """``fn(model, x)`` eagerly and replayed over ``calls`` inputs: (eager gradients, replayed ones, the replay)."""
    eager_model, replayed_model = model, type(model)()
    step = capture(lambda x: fn(replayed_model, x), replayed_model, **options)
    eager, replayed = [], []
    for seed in range(calls):
        eager.append(_grads(eager_model, fn(eager_model, _x(seed=seed).float()
                                            if eager_model.parameters()[0].dtype == np.float32 else _x(seed=seed))))
        x = _x(seed=seed).float() if replayed_model.parameters()[0].dtype == np.float32 else _x(seed=seed)
        replayed.append(_grads(replayed_model, step(x)))
    return eager, replayed, step


def test_a_result_read_twice_and_several_constants_replay_as_eagerly() -> None:
    def fn(model: nn.Module, x: mta.Tensor) -> mta.Tensor:
        h = model(x)
        return ((h.tanh() * h) * 3.0 + h * 0.5 - 1.0).sum()  # h read by an op whose first input needs it too

    eager, replayed, step = _twice(fn, Tied())
    for a, b in zip(eager, replayed, strict=True):
        _same(a, b)
    assert step.last.outcome == "replayed"


def test_a_view_of_a_weight_that_an_op_saved_counts_the_weights_writes() -> None:
    messages = []
    for replayed in (False, True):
        model = Tied()
        step = capture(lambda x, model=model: model(x).sum(), model) if replayed else (lambda x, m=model: m(x).sum())
        for _ in range(3):
            step(_x().float()).backward()
        loss = step(_x().float())
        nn.init.zeros_(model.table.weight)  # through the library: its version moves
        with pytest.raises(InPlaceModificationError) as caught:
            loss.backward()
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "a view of Param(shape=(6, 5)" in messages[1]


def test_a_replayed_call_keeps_inf_and_nan_as_results_without_warnings() -> None:
    class Overflow(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Param(np.ones(3, dtype=np.float32))

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return ((x * self.w) * 1e30 * 1e30).sum()

    model = Overflow()
    step = capture(lambda x: model(x), model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy overflow warning would fail here
        for _ in range(3):
            loss = step(mta.tensor(np.ones(3, dtype=np.float32)))
            grads = loss.backward()
    assert step.last.outcome == "replayed" and np.isinf(loss.item()) and np.isinf(grads[model.w]).all()


def test_casts_and_16_bit_results_are_cast_as_eagerly() -> None:
    def fn(model: nn.Module, x: mta.Tensor) -> mta.Tensor:
        return model(x.to(mta.bfloat16)).float().sum()

    class Half(nn.Module):
        def __init__(self) -> None:
            mta.manual_seed(5)
            self.layer = nn.Linear(6, 4, dtype="bfloat16")

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return self.layer(x).tanh()

    eager, replayed, step = _twice(fn, Half())
    for a, b in zip(eager, replayed, strict=True):
        _same(a, b)
        assert all(g.dtype == mta.bfloat16 for g in b.values())
    assert step.last.outcome == "replayed"
    model = Half()
    loss = capture(lambda x: fn(model, x), model)
    values = [loss(_x(seed=1).float()) for _ in range(3)]
    assert [v.dtype for v in values] == [np.float32] * 3 and len({float(v.item()) for v in values}) == 1


def test_outputs_keep_their_structure_what_requires_grad_and_a_fresh_constant() -> None:
    model = Switch()

    def fn(x: mta.Tensor) -> dict[str, Any]:
        h = model(x)
        return {"loss": h.sum(), "pair": (h, x * 2.0), "list": [h.detach(), mta.tensor(np.arange(3.0))], "none": None}

    step = capture(fn, model)
    for seed in range(4):
        eager, replayed = fn(_x(seed=seed)), step(_x(seed=seed))
        assert type(replayed["pair"]) is tuple and type(replayed["list"]) is list and replayed["none"] is None
        flat = [eager["loss"], *eager["pair"], *eager["list"]]
        for a, b in zip(flat, [replayed["loss"], *replayed["pair"], *replayed["list"]], strict=True):
            assert np.array_equal(a.numpy(), b.numpy()) and a.requires_grad == b.requires_grad
        replayed["list"][1].data[...] = -1.0  # a caller's write to a returned constant stays its own
    assert step.last.outcome == "replayed", step.last
    assert np.array_equal(step(_x())["list"][1].numpy(), np.arange(3.0))


def test_the_first_ops_result_returned_alone() -> None:
    x = mta.tensor(np.linspace(-1, 1, 5), requires_grad=True)
    step = capture(lambda x: x.tanh())
    for _ in range(3):
        out = step(x)
    assert step.last.outcome == "replayed" and np.array_equal(out.numpy(), np.tanh(x.numpy()))
    assert np.array_equal(out.sum().backward()[x], x.tanh().sum().backward()[x])


def test_an_eager_op_on_a_replayed_result_walks_its_steps_one_by_one_with_their_checks() -> None:
    model, eager = Tied(), Tied()
    step = capture(lambda x: (lambda h: h.tanh() * h)(model(x)), model)  # a result read twice inside
    for seed in range(4):
        x = _x(seed=seed).float()
        expected = _grads(eager, ((lambda h: h.tanh() * h)(eager(x)) * 3.0).exp().sum())
        _same(expected, _grads(model, (step(x) * 3.0).exp().sum()))
    out = (step(_x().float()) * 3.0).sum()
    model.table.weight.data[0, 0] += 1.0  # a raw write before the backward that walks the replayed steps
    with pytest.raises(InPlaceModificationError, match="matmul saved its input 1"):
        out.backward()


def test_a_replayed_backward_frees_what_the_forward_saved_while_the_loss_lives() -> None:
    model = Switch()
    step = _replaying(model)
    loss = step(_x())
    held = [id(p.data) for p in model.parameters()]
    saved = [weakref.ref(a) for ctx in loss.grad_fn.graph.ctxs if ctx is not None for a in ctx.saved
             if isinstance(a, np.ndarray) and a.base is None and id(a) not in held]  # activations, the input
    assert saved
    loss.backward()
    gc.collect()
    assert all(ref() is None for ref in saved)


def test_graph_freed_and_nested_captures_say_what_eager_says() -> None:
    model = Switch()
    eager = model(_x()).sum()
    eager.backward()
    with pytest.raises(GraphFreedError) as eagerly:
        eager.backward()
    step = _replaying(model)
    loss = step(_x())
    loss.backward()
    with pytest.raises(GraphFreedError) as replayed:
        loss.backward()
    assert str(replayed.value) == str(eagerly.value)
    inner = capture(lambda x: model(x), model)
    outer = capture(lambda x: inner(x).sum(), model)
    outer(_x())
    assert inner.last.reason == "called inside another capture, which records its ops itself"


def test_numbers_lists_and_dicts_of_arguments_are_guarded_and_read() -> None:
    model, eager = Switch(), Switch()

    def fn(model: nn.Module, parts: dict[str, Any], scale: float) -> mta.Tensor:
        return (model(parts["x"][0]) * scale + model(parts["x"][1])).sum()

    step = capture(lambda parts, scale: fn(model, parts, scale), model)
    for turn in range(8):
        scale = (2.0, 3.0)[turn // 4]
        parts = {"x": [_x(seed=turn), _x(seed=turn + 10)]}
        _same(_grads(eager, fn(eager, parts, scale)), _grads(model, step(parts, scale)))
    assert step.counts == {"captured": 2, "checked": 2, "replayed": 4, "eager": 0}


def test_the_least_recently_used_key_is_forgotten_first() -> None:
    model = Switch()
    step = capture(lambda x: model(x).sum(), model, max_programs=2)
    for rows in (3, 3, 2, 2, 3, 2, 4, 4, 3, 2):
        step(_x(rows)).backward()
    # 3 and 2 rows are captured, checked, replayed; 4 rows then forgets 3 rows (the least recently
    # used), 3 rows forgets 2 rows, which forgets 4 rows
    assert step.counts == {"captured": 5, "checked": 3, "replayed": 2, "eager": 0}
    assert step.last.outcome == "captured"


def test_a_refused_key_is_captured_again_once_the_models_tensors_are_others() -> None:
    model = Switch()
    step = capture(lambda x, y: (model(x).sum() / float((y > 0).sum())), model)
    for seed in range(3):
        step(_x(seed=seed), np.array([0, 1, seed]))  # a divisor of 1, then of 2: refused
    assert step.last.outcome == "eager"
    model.first = nn.Linear(6, 5, dtype="float64")
    step(_x(), np.array([0, 1, 1]))
    assert step.last.outcome == "captured"


def test_a_frozen_view_of_a_replaced_layers_array_is_never_replayed() -> None:
    model = Switch()

    def fn(x: mta.Tensor) -> mta.Tensor:  # a constant viewing the weight's array, made in Python
        return (model(x) * mta.from_numpy(model.second.weight.data[0, :4])).sum()

    step = capture(fn, model)
    for _ in range(3):
        step(_x())
    model.second = nn.Linear(5, 4, dtype="float64")
    assert np.array_equal(step(_x()).numpy(), fn(_x()).numpy())


def test_an_array_the_model_holds_is_read_afresh() -> None:
    model = MaskedSum()
    step = capture(lambda x: model(x), model)
    for _ in range(3):
        step(_x())
    assert step.last.outcome == "replayed"
    model.mask = np.array([1.0, 0.0, 2.0, 0.0])
    assert np.array_equal(step(_x()).numpy(), model(_x()).numpy())


def test_inputs_made_outside_or_from_the_models_arrays_inside_are_refused() -> None:
    model = Switch()
    made_outside = model(_x())  # an argument with a graph of its own
    step = capture(lambda h: (h * 2.0).sum(), model)
    step(made_outside)
    assert step.last.outcome == "eager" and "was made by ops outside this call" in step.last.reason

    def leaf_inside(x: mta.Tensor) -> mta.Tensor:
        weight = mta.Tensor(model.first.weight.data, requires_grad=True)  # the model's array, a new leaf
        return (x @ weight).sum()

    step = capture(leaf_inside, model)
    step(_x())
    assert step.last.outcome == "eager" and "neither a tensor of the model nor an argument" in step.last.reason

    def rebinding(x: mta.Tensor) -> mta.Tensor:
        model.first.bias.data = model.first.bias.data.copy()  # the call assigns the model's array
        return model(x).sum()

    step = capture(rebinding, model)
    step(_x())
    assert step.last.outcome == "eager" and "assigned a tensor of the model" in step.last.reason


def test_a_replay_is_made_of_a_callable_a_model_and_a_positive_number_of_programs() -> None:
    model = Switch()
    with pytest.raises(TypeError, match="Replay: fn must be callable, got int"):
        Replay(3, model)
    with pytest.raises(TypeError, match=r"Replay: model must have replay_state\(\) \(an nn.Module\), got list"):
        Replay(lambda x: x, [])
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match=f"Replay: max_programs must be a positive int, got {bad!r}"):
            Replay(lambda x: x, model, max_programs=bad)

    def loss(x: mta.Tensor) -> mta.Tensor:
        return model(x).sum()

    step = Replay(loss, model)
    assert repr(step) == "Replay(test_a_replay_is_made_of_a_callable_a_model_and_a_positive_number_of_programs." \
                         "<locals>.loss)"
    step(_x())
    step(_x())
    assert repr(step).endswith(".loss, captured=1, checked=1)")


def test_numbers_of_another_type_lists_or_tuples_and_shared_places_are_other_keys() -> None:
    model = Switch()
    step = capture(lambda x, n, parts: (model(x) * n + model(parts[0]) - model(parts[1])).sum(), model)
    a, b = _x(seed=1), _x(seed=2)
    for n, parts in [(2, [a, b]), (2, [a, b]), (2.0, [a, b]), (2, (a, b)), (True, [a, b])]:
        step(_x(), n, parts)
    assert step.counts == {"captured": 4, "checked": 1, "replayed": 0, "eager": 0}
    places = capture(lambda p, q, r: (model(p) + model(q) * 2.0 + model(r) * 3.0).sum(), model)
    x, y = _x(seed=3), _x(seed=4)
    for _ in range(3):
        places(x, x, y)  # the first two arguments share an array: the program reads it from place 0
    eager = Switch()
    _same(_grads(eager, (eager(x) + eager(y) * 2.0 + eager(y) * 3.0).sum()), _grads(model, places(x, y, y)))
    assert places.last.outcome == "captured"


def test_one_program_is_enough_and_a_new_replay_has_heard_nothing() -> None:
    model = Switch()
    step = capture(functools.partial(lambda model, x: model(x).sum(), model), model, max_programs=1)
    assert step.last is None and repr(step) == "Replay(partial)"
    for _ in range(3):
        step(_x())
    assert step.last.outcome == "replayed"


def test_a_returned_detach_counts_the_writes_of_what_it_detaches_as_eagerly() -> None:
    messages = []
    for replayed in (False, True):
        model = Switch()

        def fn(x: mta.Tensor, model: nn.Module = model) -> Any:
            h = model(x)
            return (h * h).sum(), h.detach(), h.reshape(-1)  # h is saved by the mul

        step = capture(fn, model) if replayed else fn
        for _ in range(3):
            loss, detached, flat = step(_x())
            loss.backward()
        loss, detached, flat = step(_x())
        assert detached.view_of is not None and flat.view_of is detached.view_of
        assert not detached.requires_grad and flat.requires_grad
        nn.init.zeros_(detached)  # a write through the library to the detached array: h's version moves
        with pytest.raises(InPlaceModificationError) as caught:
            loss.backward()
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_a_returned_view_of_a_result_nothing_else_keeps_replays() -> None:
    model, eager = Switch(), Switch()
    step = capture(lambda x: model(x).tanh().reshape(-1), model)
    for seed in range(4):
        out = step(_x(seed=seed))
        assert np.array_equal(out.numpy(), eager(_x(seed=seed)).tanh().reshape(-1).numpy())
        assert out.view_of is not None and out.view_of.shape == (3, 4)
    assert step.last.outcome == "replayed"


def test_returned_constants_arguments_and_arrays_of_the_model_are_the_callers_own() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            self.layer = nn.Linear(6, 4, dtype="float64")
            self.mask = np.array([1.0, 0.0, 2.0, 0.0])

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return self.layer(x)

    model = Masked()

    def fn(x: mta.Tensor) -> Any:
        scale = mta.tensor(np.full(4, 0.5))  # a constant made in the call, read by an op, returned detached
        return ((model(x) * scale).sum(), mta.tensor(np.arange(3.0)), scale.detach(), x.detach(),
                mta.from_numpy(model.mask))

    step = capture(fn, model)
    for _ in range(4):
        loss, fresh, scale, x_again, mask = step(x := _x())
        assert np.array_equal(fresh.numpy(), np.arange(3.0)) and np.array_equal(scale.numpy(), np.full(4, 0.5))
        assert np.array_equal(x_again.numpy(), x.numpy()) and x_again.view_of is x
        assert mask.data is model.mask
        fresh.data[...] = -1.0  # the caller's copies: the next call's constants are untouched
        scale.data[...] = -1.0
    assert step.last.outcome == "replayed"
    assert np.array_equal(loss.numpy(), ((model(x_again) * 0.5).sum()).numpy())


def test_a_raw_write_to_an_array_the_model_holds_is_refused_as_eagerly() -> None:
    messages = []
    for replayed in (False, True):
        model = MaskedSum()
        step = capture(lambda x, model=model: model(x), model) if replayed else model
        for _ in range(3):
            step(_x()).backward()
        loss = step(_x())
        model.mask[1] = 5.0  # a raw write to the array the mul saved
        with pytest.raises(InPlaceModificationError, match="checksum differs") as caught:
            loss.backward()
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_refusals_name_the_op_where_they_happened() -> None:
    model = Switch()
    outside = mta.tensor(np.ones(4), requires_grad=True)
    step = capture(lambda x: (model(x) * outside).sum(), model)
    step(_x())
    assert step.last.reason.startswith("op 4 (mul): an input of shape (4,) requires grad")
    step = capture(lambda x: (model(x).sum(), mta.Tensor(x.data, requires_grad=True)), model)
    step(_x())
    assert step.last.reason == ("an input of shape (3, 6) requires grad but is neither a tensor of the model nor "
                                "an argument: a replay could not tell whether it is the same one next time; pass it "
                                "as an argument")


def test_a_view_of_a_tensor_made_in_the_call_of_the_models_array_replays() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            self.layer = nn.Linear(6, 4, dtype="float64")
            self.mask = np.array([1.0, 0.0, 2.0, 0.5])

        def forward(self, x: mta.Tensor) -> mta.Tensor:  # the mul saves a view of a tensor of the array
            return (self.layer(x) * mta.from_numpy(self.mask).reshape(1, 4)).sum()

    model = Masked()
    step = capture(lambda x: model(x), model)
    for seed in range(4):
        _same(_grads(model, model(_x(seed=seed))), _grads(model, step(_x(seed=seed))))
    assert step.last.outcome == "replayed"


def test_a_detach_of_the_first_result_shares_its_array_and_the_first_constant_is_copied() -> None:
    grads = []
    for replayed in (False, True):
        x = mta.tensor(np.linspace(-1.0, 1.0, 4), requires_grad=True)

        def fn(x: mta.Tensor) -> Any:
            h = x.tanh()  # the first op; the mul saves its result
            return (h * h).sum(), h.detach(), mta.tensor(np.arange(3.0))

        step = capture(fn) if replayed else fn
        for _ in range(3):
            loss, detached, constant = step(x)
            constant.data[...] = -1.0
            assert np.array_equal(step(x)[2].numpy(), np.arange(3.0))
        loss, detached, _ = step(x)
        detached.data[...] = 0.5  # a raw write through the detach: the mul's saved array is the same one
        grads.append(loss.backward()[x])
    assert np.array_equal(grads[0], grads[1])


def test_two_tensors_of_the_model_that_stop_sharing_an_array_are_another_key() -> None:
    class Twins(nn.Module):
        def __init__(self) -> None:
            shared = np.linspace(-1.0, 1.0, 24).reshape(6, 4)
            self.a = nn.Param(shared)
            self.b = nn.Param(shared)  # one array under two parameters: a program reads it from the first

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return ((x @ self.a).tanh() + (x @ self.b) * 2.0).sum()

    model = Twins()
    step = capture(lambda x: model(x), model)
    for seed in range(3):
        step(_x(seed=seed)).backward()
    model.b.data = np.full((6, 4), 0.5)  # no longer shared
    _same(_grads(model, model(_x())), _grads(model, step(_x())))
    assert step.last.outcome == "captured"

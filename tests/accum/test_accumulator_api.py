"""Errors that name the problem, the Burn-style container path, and mid-window state."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator, DynamicLossScaler, GradientsAccumulator
from minitorch_accum.nn import functional as F
from tests.accum.helpers import data, max_difference, mlp, summed_loss, window_grads


def test_bad_arguments_are_named() -> None:
    model = mlp()
    with pytest.raises(ValueError, match=r"steps .* must be a positive int, got 0"):
        Accumulator(model, steps=0)
    with pytest.raises(ValueError, match=r"steps .* must be a positive int, got -2"):
        Accumulator(model, steps=-2)
    with pytest.raises(ValueError, match="reduction must be one of mean, sum, items, mean_nominal, got 'avg'"):
        Accumulator(model, steps=2, reduction="avg")
    with pytest.raises(ValueError, match="fusion must be one of leaf, gemm, none"):
        Accumulator(model, steps=2, fusion="magic")
    with pytest.raises(TypeError, match="model must be a Module"):
        Accumulator(object(), steps=2)


def test_window_misuse_is_a_clear_error() -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=1)
    with pytest.raises(ValueError, match="reduction='items' needs num_items="):
        acc.backward(summed_loss(model, x[:2], y[:2], "float64"))
    with pytest.raises(ValueError, match="num_items must be a non-negative int"):
        acc.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=-1)
    acc.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=2)
    with pytest.raises(RuntimeError, match="already holds steps=1 micro-batches"):
        acc.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=2)
    acc.zero()
    two = Accumulator(model, steps=2)
    two.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=2)
    two.grads()
    with pytest.raises(RuntimeError, match="window was closed"):
        two.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=2)
    with pytest.raises(RuntimeError, match="window is not empty"):
        two.set_steps(4)
    with pytest.raises(RuntimeError, match="window is empty"):
        Accumulator(model, steps=2).grads()


def test_gradients_accumulator_sums_containers_like_burn() -> None:
    model = mlp()
    x, y = data()
    summer = GradientsAccumulator()
    for i in range(3):
        summer.accumulate(model, summed_loss(model, x[i * 3:(i + 1) * 3], y[i * 3:(i + 1) * 3], "float64").backward())
    total = summer.grads()
    direct = summed_loss(model, x[:9], y[:9], "float64").backward()
    for p in model.parameters():
        np.testing.assert_allclose(total[p], direct[p], rtol=1e-12, atol=1e-14)
    assert len(summer.grads()) == 0  # grads() took them


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_state_dict_resumes_mid_window(fusion: str) -> None:
    x, y = data()
    finished = {}
    for interrupted in (False, True):
        model = mlp("float32")
        acc = Accumulator(model, steps=4, fusion=fusion, compensated=(fusion == "leaf"))
        for i in range(4):
            if interrupted and i == 2:
                state = acc.state_dict()
                record = model.to_record()
                model = mlp("float32", seed=9)
                model.load_record(record)
                acc = Accumulator(model, steps=4, fusion=fusion, compensated=(fusion == "leaf"))
                acc.load_state_dict(state)
            acc.backward(summed_loss(model, x[i * 6:(i + 1) * 6], y[i * 6:(i + 1) * 6], "float32"), num_items=6)
        finished[interrupted] = window_grads(acc, model)
    assert max_difference(finished[False], finished[True]) == 0.0


def test_optimizer_reads_the_window_with_the_scale_folded_in() -> None:
    x, y = data()
    results = []
    for use_window in (True, False):
        model = mlp("float64")
        opt = optim.SGD(0.5, momentum=0.9)
        acc = Accumulator(model, steps=3, accum_dtype="float64")
        for _ in range(2):
            for i in range(3):
                acc.backward(summed_loss(model, x[i * 5:(i + 1) * 5], y[i * 5:(i + 1) * 5], "float64"),
                             num_items=5)
            opt.step(model, acc if use_window else acc.grads())
            acc.zero()
        results.append([p.numpy() for p in model.parameters()])
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-16)


def test_clipping_is_folded_into_the_window_scale() -> None:
    model = mlp("float64")
    x, y = data()
    acc = Accumulator(model, steps=2, accum_dtype="float64")
    for i in range(2):
        acc.backward(summed_loss(model, x[i * 5:(i + 1) * 5], y[i * 5:(i + 1) * 5], "float64"), num_items=5)
    norm = optim.clip_grad_norm(acc, 1e-3)
    assert norm > 1e-3
    assert optim.grad_norm(acc) == pytest.approx(1e-3, rel=1e-5)
    grads = acc.grads()
    total = np.sqrt(sum(np.sum(np.asarray(grads[p]) ** 2) for p in model.parameters()))
    assert total == pytest.approx(1e-3, rel=1e-5)


def test_unused_parameters_get_no_gradient_and_keep_no_stale_values() -> None:
    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            self.a = nn.Linear(5, 3, dtype="float64")
            self.b = nn.Linear(5, 3, dtype="float64")
            self.use_b = True

        def forward(self, t):
            return self.b(t) if self.use_b else self.a(t)

    model = TwoHeads()
    x, y = data()
    acc = Accumulator(model, steps=1, accum_dtype="float64")
    acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    acc.zero()
    model.use_b = False
    acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    grads = acc.grads()
    assert model.a.weight in grads and model.b.weight not in grads


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_loss_of_another_model_is_an_error_and_counts_nothing(fusion: str) -> None:
    model, other = mlp(seed=0), mlp(seed=1)
    x, y = data()
    acc = Accumulator(model, steps=4, fusion=fusion)
    acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)
    with pytest.raises(ValueError, match=r"not part of this accumulator's model"):
        acc.backward(summed_loss(other, x[3:6], y[3:6], "float64"), num_items=3)
    assert (acc.micro_step, acc.items_seen) == (1, 3)  # the failed micro-batch was not counted


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
@pytest.mark.parametrize("foreign_first", [True, False], ids=["foreign-reached-first", "model-reached-first"])
def test_two_models_in_one_loss_is_an_error(fusion: str, foreign_first: bool) -> None:
    import minitorch_accum as mta
    from minitorch_accum.nn import functional as F

    model = mlp(seed=0)
    foreign = nn.Linear(3, 3, dtype="float64") if foreign_first else nn.Linear(5, 5, dtype="float64")
    x, y = data()

    def loss_of(rows: slice) -> mta.Tensor:
        inputs = mta.tensor(x[rows], dtype="float64")
        # backward meets the layer nearest the loss first
        logits = foreign(model(inputs)) if foreign_first else model(foreign(inputs))
        return F.cross_entropy(logits, y[rows], reduction="sum")

    acc = Accumulator(model, steps=2, fusion=fusion)
    with pytest.raises(ValueError, match=r"that is not part of this accumulator's model"):
        acc.backward(loss_of(slice(0, 3)), num_items=3)
    assert acc.micro_step == 0
    if fusion == "none" or foreign_first:
        # nothing was written before the foreign parameter was met: the window is whole and usable
        acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)
        assert acc.micro_step == 1
        acc.zero()
        return
    # part of the micro-batch is in the arena: nothing may step on it until zero()
    for call in (lambda: acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3),
                 acc.grads, acc.gradient_window, acc.state_dict, lambda: optim.SGD(0.1).step(model, acc)):
        with pytest.raises(RuntimeError, match="failed halfway"):
            call()
    acc.zero()
    acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)
    expected = summed_loss(model, x[:3], y[:3], "float64").backward()
    got = acc.grads()
    for p in model.parameters():
        np.testing.assert_allclose(got[p], np.asarray(expected[p]) / 3, rtol=1e-12)


@pytest.mark.parametrize("fusion", ["gemm", "none"])
def test_loss_without_any_model_parameter_is_an_error(fusion: str) -> None:
    import minitorch_accum as mta

    model = mlp()
    acc = Accumulator(model, steps=2, fusion=fusion)
    free = mta.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    with pytest.raises(ValueError, match=r"^backward: the loss does not depend on any parameter of this accumulator's "
                                         r"model$"):
        acc.backward((free * free).sum(), num_items=2)
    assert acc.micro_step == 0


def _closed_window() -> Accumulator:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=2)
    acc.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=2)
    acc.grads()
    return acc


def _saved(fusion: str = "gemm") -> dict:
    return Accumulator(mlp(), steps=2, fusion=fusion).state_dict()


def _full_window() -> Accumulator:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=1)
    acc.backward(summed_loss(model, x[:2], y[:2], "float64"), num_items=2)
    return acc


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: Accumulator(mlp(), steps=True), ValueError,
     "steps (k, the micro-batches per window) must be a positive int, got True"),
    (lambda: Accumulator(object(), steps=2), TypeError, "Accumulator: model must be a Module, got object"),
    (lambda: Accumulator(mlp(), steps=2, fusion="magic"), ValueError,
     "fusion must be one of leaf, gemm, none, got 'magic'"),
    (lambda: Accumulator(mlp(), steps=2, fusion="none", compensated=True), ValueError,
     "compensated accumulation needs an arena: use fusion='leaf' or 'gemm'"),
    (lambda: Accumulator(mlp(), steps=2, fusion="none", reducer=object()), ValueError,
     "data-parallel accumulation reduces the gradient arena: use fusion='leaf' or 'gemm'"),
    (lambda: Accumulator(nn.Sequential(nn.Tanh()), steps=2), ValueError, "Accumulator: the model has no parameters"),
    (lambda: Accumulator(mlp(), steps=2, trace=3), TypeError,
     "trace must be a bool, an AccumulationTrace or a path, got int"),
    (lambda: Accumulator(mlp(), steps=2).backward(np.ones(1), num_items=1), ValueError,
     "backward: loss must be a one-element Tensor, got ndarray(1,)"),
    (lambda: Accumulator(mlp(), steps=2).backward(mta.tensor(np.ones(3)), num_items=1), ValueError,
     "backward: loss must be a one-element Tensor, got Tensor(3,)"),
    (lambda: Accumulator(mlp(), steps=2).backward(2.5, num_items=1), ValueError,
     "backward: loss must be a one-element Tensor, got float"),
    (lambda: _full_window().backward(mta.tensor([1.0]), num_items=1), RuntimeError,
     "backward: the window already holds steps=1 micro-batches; step the optimizer and call acc.zero()"),
    (lambda: Accumulator(mlp(), steps=2).backward(mta.tensor([1.0]), num_items=True), ValueError,
     "backward: num_items must be a non-negative int, got True"),
    (lambda: Accumulator(mlp(), steps=2).backward(mta.tensor([1.0]), num_items=2.0), ValueError,
     "backward: num_items must be a non-negative int, got 2.0"),
    (lambda: Accumulator(mlp(), steps=2).backward(mta.tensor([1.0])), ValueError,
     "backward: reduction='items' needs num_items= (how many items the summed loss covers); use "
     "reduction='mean' for losses that are already means"),
    (lambda: _closed_window().backward(mta.tensor([1.0]), num_items=1), RuntimeError,
     "backward: this window was closed by grads()/an optimizer step; call acc.zero() first"),
    (lambda: _closed_window().state_dict(), RuntimeError,
     "state_dict: the window is closed; save before grads()/the step, or after zero()"),
    (lambda: _closed_window().set_steps(3), RuntimeError,
     "set_steps: the current window is not empty; change k after acc.zero()"),
    (lambda: Accumulator(mlp(), steps=2, fusion="none").load_state_dict(_saved("gemm")), ValueError,
     "accumulator state was saved with fusion='gemm', this one uses 'none'"),
    (lambda: Accumulator(mlp(), steps=2).load_state_dict({"meta": {"fusion": "gemm"}, "arrays": {}}), ValueError,
     "accumulator state is incomplete: it has no 'micro_step'"),
], ids=["steps", "model", "fusion", "compensated-none", "reducer-none", "no-params", "trace", "loss-array",
        "loss-shape", "loss-float", "full-window", "num-items-bool", "num-items-float", "num-items-missing",
        "closed-backward", "closed-state", "set-steps", "state-fusion", "state-incomplete"])
def test_each_misuse_says_exactly_what_is_wrong(call, error: type, message: str) -> None:
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        call()


@pytest.mark.parametrize(("call", "what"), [
    (lambda acc, loss: acc.backward(loss, num_items=3), "backward"),
    (lambda acc, loss: acc.grads(), "the optimizer step"),
    (lambda acc, loss: acc.state_dict(), "state_dict"),
], ids=["backward", "step", "state_dict"])
def test_a_window_that_failed_halfway_names_the_call_refused(call, what: str) -> None:
    model = mlp(seed=0)
    x, y = data()
    foreign = nn.Linear(5, 5, dtype="float64")
    acc = Accumulator(model, steps=2)
    with pytest.raises(ValueError, match=r"the window may hold part of this micro-batch: call acc\.zero"):
        acc.backward(F.cross_entropy(model(foreign(mta.tensor(x[:3]))), y[:3], reduction="sum"), num_items=3)
    assert acc.store.poisoned is True
    with pytest.raises(RuntimeError, match=f"^{re.escape(what)}: a backward\\(\\) of this window failed halfway, so "
                                           r"its gradients are not sums of whole micro-batches; call acc.zero\(\) "
                                           r"to discard the window$"):
        call(acc, summed_loss(model, x[:3], y[:3], "float64"))
    acc.zero()
    assert acc.store.poisoned is False  # a new window is whole again
    acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)


@pytest.mark.parametrize(("fusion", "after"), [
    ("none", "the window is unchanged"),
    ("gemm", "the window may hold part of this micro-batch: call acc.zero() to discard it"),
])
def test_a_foreign_parameter_is_named_by_its_shape_with_what_became_of_the_window(fusion: str, after: str) -> None:
    model = mlp(seed=0)
    x, y = data()
    foreign = nn.Linear(3, 2, bias=False, dtype="float64")
    acc = Accumulator(model, steps=2, fusion=fusion)
    with pytest.raises(ValueError, match=re.escape(
            "backward: the loss depends on a parameter of shape (3, 2) that is not part of this accumulator's model "
            f"(a loss from another model, or two models in one window); {after}") + "$"):
        acc.backward(F.cross_entropy(foreign(model(mta.tensor(x[:3]))), y[:3] % 2, reduction="sum"), num_items=3)
    assert acc.store.poisoned is False  # nothing of the micro-batch was written before the foreign layer was met


def test_zero_on_an_empty_window_just_starts_the_next_one() -> None:
    scaler = DynamicLossScaler(init_scale=4.0, growth_interval=1)
    acc = Accumulator(mlp(), steps=2, loss_scaler=scaler)
    acc.zero()
    acc.zero()
    assert acc.window_index == 2 and acc.micro_step == 0
    assert scaler.scale == 4.0 and scaler.clean_windows == 0  # an empty window is no clean window
    assert acc.skipped_windows == []


def test_windows_are_numbered_and_a_skipped_one_is_named_by_its_number() -> None:
    model = mlp()
    x, y = data()
    bad = x.copy()
    bad[0, 0] = np.inf
    scaler = DynamicLossScaler(init_scale=8.0)
    acc = Accumulator(model, steps=1, loss_scaler=scaler)
    for inputs in (x, x, bad, x):
        acc.backward(summed_loss(model, inputs[:3], y[:3], "float64"), num_items=3)
        acc.zero()
    assert acc.window_index == 4
    assert acc.skipped_windows == [2]
    assert [(e.window, e.old_scale, e.new_scale) for e in scaler.events] == [(2, 8.0, 4.0)]


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_scale_window_multiplies_the_window_gradient_by_its_factor(fusion: str) -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=1, reduction="sum", fusion=fusion, accum_dtype="float64")
    acc.backward(summed_loss(model, x[:4], y[:4], "float64"), num_items=4)
    acc.scale_window(2.0)
    assert acc.window_scale() == 2.0
    expected = summed_loss(model, x[:4], y[:4], "float64").backward()
    got = acc.grads()
    for p in model.parameters():
        np.testing.assert_array_equal(got[p], 2.0 * np.asarray(expected[p]))


def test_an_accumulator_keeps_its_settings_and_traces_only_when_asked() -> None:
    model = mlp("float32")
    scaler = DynamicLossScaler()
    acc = Accumulator(model, steps=3, reduction="sum", fusion="leaf", compensated=True, loss_scaler=scaler)
    assert (acc.steps, acc.reduction, acc.fusion, acc.compensated) == (3, "sum", "leaf", True)
    assert acc.loss_scaler is scaler and acc.reducer is None
    plain = Accumulator(model, steps=2)
    assert plain.trace is None and plain.store.recorder is None and plain.compensated is False


def test_float32_parameters_accumulate_in_float64_when_asked() -> None:
    model = mlp("float32")
    x, y = data()
    for accum_dtype, expected in (("float64", np.float64), ("float32", np.float32)):
        acc = Accumulator(model, steps=1, accum_dtype=accum_dtype)
        acc.backward(summed_loss(model, x[:4], y[:4], "float32"), num_items=4)
        assert {np.asarray(g).dtype for g in acc.grads().values()} == {np.dtype(expected)}


def test_a_micro_batch_of_no_items_is_accepted_and_counts_none() -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=2)
    acc.backward(summed_loss(model, x[:0], y[:0], "float64"), num_items=0)  # a rank's data ran out, say
    acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)
    assert (acc.micro_step, acc.items_seen) == (2, 3)
    expected = summed_loss(model, x[:3], y[:3], "float64").backward()
    got = acc.grads()
    for p in model.parameters():
        np.testing.assert_allclose(got[p], np.asarray(expected[p]) / 3, rtol=1e-12)


def test_mean_losses_without_item_counts_count_no_items() -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=2, reduction="mean", trace=True)
    for i in range(2):
        acc.backward(F.cross_entropy(model(mta.tensor(x[i * 3:(i + 1) * 3], dtype="float64")), y[i * 3:(i + 1) * 3]))
    assert acc.items_seen == 0
    acc.zero()
    window, = [s for s in acc.trace.spans if s.name == "ProfilerStep#0"]
    assert (window.args["micro_batches"], window.args["items"]) == (2, 0)


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_a_stale_forward_names_the_parameter_written_and_only_a_parameter(fusion: str) -> None:
    from minitorch_accum.autodiff import InPlaceModificationError

    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=2, fusion=fusion)
    loss = summed_loss(model, x[:3], y[:3], "float64")
    model[0].weight.data[0, 0] += 1.0  # a raw write between the forward and its backward
    with pytest.raises(InPlaceModificationError, match=re.escape(
            "linear saved its input 1, parameter '0.weight' Param(shape=(5, 8), dtype=float64), in the forward")):
        acc.backward(loss, num_items=3)
    inputs = mta.tensor(x[:3], dtype="float64")
    loss = F.cross_entropy(model(inputs), y[:3], reduction="sum")
    inputs.bump_version()  # the batch, not a parameter, was written: there is no name to give it
    with pytest.raises(InPlaceModificationError, match=re.escape(
            "linear saved its input 0, Tensor(shape=(3, 5), dtype=float64), in the forward")) as info:
        acc.backward(loss, num_items=3)
    assert "parameter '" not in str(info.value)
    assert acc.micro_step == 0 and not acc.store.poisoned


@pytest.mark.parametrize(("fusion", "store"), [("gemm", "ArenaStore"), ("none", "ContainerStore")])
def test_the_repr_says_the_window_and_where_its_gradients_are(fusion: str, store: str) -> None:
    model = mlp()
    x, y = data()
    acc = Accumulator(model, steps=2, fusion=fusion)
    acc.backward(summed_loss(model, x[:3], y[:3], "float64"), num_items=3)
    assert repr(acc) == (f"Accumulator(steps=2, reduction='items', fusion={fusion!r}, micro_step=1, items_seen=3, "
                         f"store={store}, {acc.store.nbytes} bytes)")

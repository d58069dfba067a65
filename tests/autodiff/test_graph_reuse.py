"""Graph reuse: a replayed forward's gradients are an eager forward's, bit for bit, and every
difference (shape, branch, requires_grad, in-place change, a graph still alive, a tensor of an
earlier micro-batch) is seen: the op where it shows runs eagerly, and the report says why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import GraphFreedError, GraphReuse
from minitorch_accum.models import CharMLP, CharTransformer, TransformerConfig, digits_mlp
from minitorch_accum.nn import functional as F

Batches = list[tuple[Any, Any]]


def _transformer() -> nn.Module:
    return CharTransformer(TransformerConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8))


def _chars(rows: int, length: int = 8, vocab: int = 11, seed: int = 0) -> Batches:
    rng = np.random.default_rng(seed)
    return [(mta.tensor(rng.integers(0, vocab, size=(rows, length))), rng.integers(0, vocab, size=(rows, length)))
            for _ in range(3)]


def _digits(rows: int, seed: int = 0) -> Batches:
    rng = np.random.default_rng(seed)
    return [(mta.tensor(rng.normal(size=(rows, 64)).astype(np.float32)), rng.integers(0, 10, size=rows))
            for _ in range(3)]


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[int], Batches]]] = {
    "char_transformer": (_transformer, _chars),
    "char_mlp": (lambda: CharMLP(11), _chars),
    "digits_mlp": (digits_mlp, _digits),
}


def _loss(model: nn.Module, x: Any, y: Any) -> mta.Tensor:
    out = model(x)
    out = out[0] if isinstance(out, tuple) else out
    return F.cross_entropy(out, y, reduction="sum")


def _window_grads(build: Callable[[], nn.Module], batches: Batches, reuse: GraphReuse | None, fusion: str,
                  windows: int = 2, loss: Callable[..., mta.Tensor] = _loss) -> list[dict[str, np.ndarray]]:
    """Each window's summed gradients (windows of every batch in turn), by parameter name."""
    mta.manual_seed(0)
    model = build()
    mta.manual_seed(1)  # dropout's masks: the same stream in both runs
    acc = Accumulator(model, steps=len(batches), fusion=fusion, reduction="sum")
    grads = []
    for _ in range(windows):
        for x, y in batches:
            if reuse is None:
                value = loss(model, x, y)
            else:
                with reuse.forward():
                    value = loss(model, x, y)
            acc.backward(value)
        grads.append({name: np.array(g) for name, g in
                      ((n, acc.grads()[p]) for n, p in model.named_parameters())})
        acc.zero()
    return grads


def _assert_identical(eager: list[dict[str, np.ndarray]], replayed: list[dict[str, np.ndarray]]) -> None:
    assert len(eager) == len(replayed)
    for a, b in zip(eager, replayed, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            assert np.array_equal(a[name], b[name]), name


@pytest.mark.parametrize("fusion", ["gemm", "leaf", "none"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_replayed_window_gradients_equal_eager_bit_for_bit(name: str, fusion: str) -> None:
    build, data = MODELS[name]
    batches = data(4)
    reuse = GraphReuse()
    _assert_identical(_window_grads(build, batches, None, fusion), _window_grads(build, batches, reuse, fusion))
    assert reuse.counts["recorded"] == 1 and reuse.counts["replayed"] == 2 * len(batches) - 1
    assert reuse.last is not None and reuse.last.outcome == "replayed" and reuse.last.eager_ops == 0


@pytest.mark.parametrize("flash", [True, False])
def test_the_nanogpt_oracle_model_with_dropout_replays_bit_for_bit(flash: bool) -> None:
    pytest.importorskip("torch")  # the oracle test's module, where the model is written, needs it
    from tests.equivalence.test_nanogpt_oracle import GPT, GPTConfig, batch

    config = GPTConfig(dropout=0.25, flash=flash)
    idx, targets = batch(config, 6)
    batches = [(mta.tensor(idx[i:i + 2]), mta.tensor(targets[i:i + 2])) for i in range(0, 6, 2)]

    def loss(model: nn.Module, x: Any, y: Any) -> mta.Tensor:
        return model(x, y)[1]

    reuse = GraphReuse()
    eager = _window_grads(lambda: GPT(config), batches, None, "gemm", loss=loss)
    _assert_identical(eager, _window_grads(lambda: GPT(config), batches, reuse, "gemm", loss=loss))
    assert reuse.counts["replayed"] == 5
    # fresh masks every micro-batch: the two windows saw the same data, not the same dropout
    assert not all(np.array_equal(eager[0][name], eager[1][name]) for name in eager[0])


def test_dropout_draws_a_new_mask_in_every_replayed_micro_batch() -> None:
    reuse = GraphReuse()
    x = mta.ones(64, requires_grad=True)
    masks = []
    for _ in range(3):
        with reuse.forward():
            y = F.dropout(x, 0.5).sum()
        masks.append(y.backward()[x])
    assert reuse.counts["replayed"] == 2
    assert not np.array_equal(masks[1], masks[2])


class Switch(nn.Module):
    """A model whose forward takes one of two branches."""

    def __init__(self) -> None:
        mta.manual_seed(3)
        self.first = nn.Linear(6, 5)
        self.second = nn.Linear(5, 4)
        self.gelu = True

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        h = self.first(x)
        h = h.gelu() if self.gelu else h.tanh()
        return self.second(h)


def _step(model: nn.Module, reuse: GraphReuse | None, x: mta.Tensor) -> dict[str, np.ndarray]:
    if reuse is None:
        loss = model(x).sum()
    else:
        with reuse.forward():
            loss = model(x).sum()
    grads = loss.backward()
    return {n: np.array(grads[p]) for n, p in model.named_parameters() if p in grads}


def _both(change: Callable[[nn.Module], Any], inputs: list[mta.Tensor]) -> tuple[list[Any], GraphReuse, list[Any]]:
    """The same steps eagerly and with reuse, ``change`` applied to the model before the last two;
    (eager gradients, the reuse, the reports of the reused steps)."""
    runs = []
    reuse = GraphReuse()
    reports = []
    for r in (None, reuse):
        model = Switch()
        grads = []
        for i, x in enumerate(inputs):
            if i == len(inputs) - 2:
                change(model)
            grads.append(_step(model, r, x))
            if r is not None:
                reports.append(r.last)
        runs.append(grads)
    for a, b in zip(*runs, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            assert np.array_equal(a[name], b[name]), name
    return runs[0], reuse, reports


def _x(rows: int = 3, seed: int = 0) -> mta.Tensor:
    return mta.tensor(np.random.default_rng(seed).normal(size=(rows, 6)).astype(np.float32))


def test_another_branch_in_forward_is_seen_and_recorded_beside_the_first() -> None:
    def flip(model: Switch) -> None:
        model.gelu = False

    _, reuse, reports = _both(flip, [_x(seed=s) for s in range(5)])
    assert [r.outcome for r in reports] == ["recorded", "replayed", "replayed", "partly_replayed", "replayed"]
    assert "tanh" in reports[3].reason and reports[3].replayed_ops == 2  # the first Linear's matmul and add
    assert reuse.counts["partly_replayed"] == 1


def test_another_shape_is_recorded_as_its_own_path_and_both_replay() -> None:
    shapes = [_x(3), _x(3, 1), _x(2), _x(3, 2), _x(2, 3)]
    _, _, reports = _both(lambda model: None, shapes)
    assert [r.outcome for r in reports] == ["recorded", "replayed", "recorded", "replayed", "replayed"]
    assert "(2, 6)" in reports[2].reason


def test_a_parameter_that_stops_requiring_grad_is_seen() -> None:
    def freeze(model: Switch) -> None:
        model.first.weight.requires_grad_(False)

    eager, _, reports = _both(freeze, [_x(seed=s) for s in range(4)])
    assert "first.weight" not in eager[-1] and reports[-2].outcome != "replayed"


def test_tensors_changed_in_place_are_read_afresh() -> None:
    def change(model: Switch) -> None:
        model.first.weight.data *= 2.0  # in place: the arrays the recorded ops saw are not kept
        model.second.bias.data[...] = 0.5

    x = _x()
    _, _, reports = _both(change, [x, x, x, x])
    assert [r.outcome for r in reports] == ["recorded", "replayed", "replayed", "replayed"]
    x.data *= -1.0  # an input changed in place: the next replay computes from what it holds now
    reuse = GraphReuse()
    model = Switch()
    first = _step(model, reuse, x)
    x.data *= -1.0
    assert not np.array_equal(first["first.weight"], _step(model, reuse, x)["first.weight"])


def test_a_graph_still_alive_is_never_refilled() -> None:
    reuse = GraphReuse()
    model = Switch()
    _step(model, reuse, _x())
    with reuse.forward():
        held = model(_x(seed=1)).sum()  # no backward yet
    with reuse.forward():
        second = model(_x(seed=2)).sum()
    assert reuse.last.outcome == "eager" and "still alive" in reuse.last.reason
    expected_model = Switch()
    g1 = held.backward()
    g2 = second.backward()
    e1 = expected_model(_x(seed=1)).sum().backward()
    e2 = expected_model(_x(seed=2)).sum().backward()
    for p, q in zip(model.parameters(), expected_model.parameters(), strict=True):
        assert np.array_equal(g1[p], e1[q]) and np.array_equal(g2[p], e2[q])


def test_retain_graph_keeps_the_nodes_and_a_second_backward_works_as_eagerly() -> None:
    reuse = GraphReuse()
    model = Switch()
    _step(model, reuse, _x())
    with reuse.forward():
        loss = model(_x()).sum()
    assert reuse.last.outcome == "replayed"
    first = loss.backward(retain_graph=True)
    with reuse.forward():
        other = model(_x(seed=4)).sum()
    assert reuse.last.outcome == "eager"
    second = loss.backward()
    for p in model.parameters():
        assert np.array_equal(first[p], second[p])
    with pytest.raises(GraphFreedError):
        loss.backward()
    other.backward()


def test_a_tensor_of_an_earlier_micro_batch_has_lost_its_graph_as_eagerly() -> None:
    reuse = GraphReuse()
    model = Switch()
    with reuse.forward():
        old = model(_x())
    old.sum().backward(retain_graph=False)
    with reuse.forward():
        new = model(_x(seed=1))  # refills the nodes `old` was made with
    assert reuse.last.outcome == "replayed"
    with pytest.raises(GraphFreedError):
        old.sum().backward()
    with pytest.raises(GraphFreedError):
        (new + old).sum().backward()
    new.sum().backward()  # the failed backward freed nothing: until this one, the nodes are in use
    with reuse.forward():
        mixed = model(_x(seed=2)) + old  # an input from an earlier forward is never a match
    assert reuse.last.outcome == "partly_replayed"
    with pytest.raises(GraphFreedError):
        mixed.sum().backward()


def test_the_report_reaches_a_listener_and_nothing_recorded_is_eager() -> None:
    reuse = GraphReuse()
    seen = []
    reuse.listener = seen.append
    model = Switch()
    with mta.no_grad(), reuse.forward():
        model(_x())
    _step(model, reuse, _x())
    assert [r.outcome for r in seen] == ["eager", "recorded"]
    assert "no op recorded" in seen[0].reason
    with reuse.forward(), pytest.raises(RuntimeError, match="already open"), reuse.forward():
        pass
    assert "recorded" in repr(reuse)


class Overflow(nn.Module):
    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return (x * 1e30) * 1e30  # inf in float32: a result, as on a GPU


def test_one_errstate_per_forward_silences_every_op_inside_and_outside_a_module() -> None:
    import warnings

    x = mta.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NumPy overflow warning would fail here
        inside = Overflow()(x)
        outside = (x * 1e30) * 1e30
        reuse = GraphReuse()
        for _ in range(2):
            with reuse.forward():
                replayed = Overflow()(x).sum()
            replayed.backward()
    assert np.isinf(inside.numpy()).all() and np.isinf(outside.numpy()).all()
    assert reuse.last.outcome == "replayed"
    # outside every forward, NumPy's own state is untouched
    with pytest.raises(FloatingPointError), np.errstate(over="raise"):
        np.float32(1e30) * np.float32(1e30)


def test_grad_mode_is_per_thread_and_on_in_a_new_thread() -> None:
    import threading

    seen = []
    with mta.no_grad():
        worker = threading.Thread(target=lambda: seen.append(mta.is_grad_enabled()))
        worker.start()
        worker.join()
        assert not mta.is_grad_enabled()
    assert seen == [True] and mta.is_grad_enabled()

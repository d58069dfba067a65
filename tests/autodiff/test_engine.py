"""The backward engine: ordering, accumulation at shared tensors, freeing, grad modes."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.autodiff import LeafSink, run_backward


def test_a_10000_op_chain_backpropagates_without_recursion() -> None:
    x = mta.tensor([0.5], dtype="float64", requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0001 + 0.0
    grads = y.sum().backward()
    np.testing.assert_allclose(grads[x], [1.0001**10_000], rtol=1e-9)


def test_a_tensor_used_twice_gets_the_sum_of_both_gradients() -> None:
    x = mta.tensor([1.0, 2.0, 3.0], dtype="float64", requires_grad=True)
    y = x * x + x * 3.0  # x flows along three paths
    grads = y.sum().backward()
    np.testing.assert_allclose(grads[x], 2 * x.numpy() + 3.0)


def test_diamond_graph_visits_shared_node_once() -> None:
    x = mta.tensor([2.0], dtype="float64", requires_grad=True)
    shared = x.exp()
    y = shared * shared.tanh() + shared.sqrt()
    grads = y.sum().backward()
    e = np.exp(2.0)
    expected = (np.tanh(e) + e * (1 - np.tanh(e) ** 2) + 0.5 / np.sqrt(e)) * e
    np.testing.assert_allclose(grads[x], [expected], rtol=1e-12)


def test_backward_returns_gradients_and_does_not_store_them_on_tensors() -> None:
    layer = nn.Linear(3, 2, dtype="float64")
    loss = layer(mta.ones(4, 3, dtype="float64")).sum()
    grads = loss.backward()
    assert isinstance(grads, mta.Gradients)
    assert layer.weight in grads and layer.bias in grads
    assert grads.get(layer.weight).shape == (3, 2)
    assert set(map(id, grads)) == {id(layer.weight), id(layer.bias)}
    assert not hasattr(layer.weight, "grad")
    np.testing.assert_allclose(grads[layer.bias], [4.0, 4.0])


def test_gradients_container_errors_and_remove() -> None:
    a = mta.tensor([1.0], requires_grad=True)
    b = mta.tensor([1.0], requires_grad=True)
    grads = (a * 2.0).sum().backward()
    assert grads.get(b) is None and grads.get(b, 0) == 0
    with pytest.raises(KeyError, match="no gradient"):
        grads[b]
    removed = grads.remove(a)
    np.testing.assert_array_equal(removed, [2.0])
    assert len(grads) == 0


def test_second_backward_over_a_freed_graph_is_a_clear_error() -> None:
    x = mta.tensor([1.0, 2.0], requires_grad=True)
    loss = (x.exp() * 2.0).sum()
    loss.backward()
    with pytest.raises(mta.GraphFreedError, match="already freed"):
        loss.backward()


def test_retain_graph_allows_a_second_backward() -> None:
    x = mta.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    loss = (x * x).sum()
    first = loss.backward(retain_graph=True)[x].copy()
    second = loss.backward()[x]
    np.testing.assert_array_equal(first, second)


def test_saved_activations_are_released_after_backward() -> None:
    x = mta.tensor(np.ones((64, 64)), requires_grad=True)
    hidden = x.tanh()
    probe = weakref.ref(hidden.data)  # tanh saves its output for backward
    loss = (hidden * 2.0).sum()
    del hidden
    gc.collect()
    assert probe() is not None  # still needed by the graph
    loss.backward()
    gc.collect()
    assert probe() is None


def test_no_grad_records_nothing_and_detach_cuts_the_graph() -> None:
    x = mta.tensor([1.0, 2.0], requires_grad=True)
    with mta.no_grad():
        y = x * 2.0
        assert not mta.is_grad_enabled()
        with mta.enable_grad():
            assert mta.is_grad_enabled()
    assert not y.requires_grad and y.is_leaf
    z = (x.detach() * 3.0 + x).sum()
    np.testing.assert_array_equal(z.backward()[x], [1.0, 1.0])

    @mta.no_grad()
    def evaluate(t: mta.Tensor) -> mta.Tensor:
        return t * 5.0

    assert not evaluate(x).requires_grad


def test_backward_errors_name_the_problem() -> None:
    x = mta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"shape \(2,\); reduce it to a scalar"):
        (x * 2.0).backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        mta.tensor([1.0]).sum().backward()
    with pytest.raises(ValueError, match=r"grad has shape \(3,\), output has shape \(2,\)"):
        (x * 2.0).backward(grad=np.ones(3))
    grads = (x * 2.0).backward(grad=np.array([1.0, 10.0]))
    np.testing.assert_array_equal(grads[x], [2.0, 20.0])


def test_leaves_never_share_gradient_memory() -> None:
    a = mta.tensor([1.0, 2.0], requires_grad=True)
    b = mta.tensor([[1.0, 2.0]], requires_grad=True)
    grads = (a.reshape(1, 2) + b + a).sum().backward()
    grads[a] *= 10.0
    np.testing.assert_array_equal(grads[b], [[1.0, 1.0]])


def test_unused_branch_gets_no_gradient() -> None:
    x = mta.tensor([1.0], requires_grad=True)
    w = mta.tensor([2.0], requires_grad=True)
    _unused = w * 3.0
    grads = (x * 2.0).sum().backward()
    assert w not in grads


class _RecordingSink(LeafSink):
    """A sink that keeps what the engine hands it, in order."""

    def __init__(self, fuses_gemm: bool, listens: bool) -> None:
        self.fuses_gemm = fuses_gemm
        self.events: list[tuple[str, int]] = []
        self.sums: dict[int, np.ndarray] = {}
        if listens:
            self.leaf_done = lambda leaf: self.events.append(("done", id(leaf)))

    def accepts(self, leaf: object) -> bool:
        return True

    def add(self, leaf: object, grad: np.ndarray) -> None:
        self._sum("add", leaf, grad)

    def add_product(self, leaf: object, a: np.ndarray, b: np.ndarray) -> None:
        self._sum("product", leaf, a @ b)

    def _sum(self, kind: str, leaf: object, grad: np.ndarray) -> None:
        self.events.append((kind, id(leaf)))
        self.sums[id(leaf)] = self.sums.get(id(leaf), 0) + grad


@pytest.mark.parametrize("fuses_gemm", [False, True])
def test_a_sink_gets_the_gemm_factors_only_of_a_matmul_and_hears_when_each_leaf_is_done(fuses_gemm: bool) -> None:
    rng = np.random.default_rng(0)
    x = mta.tensor(rng.standard_normal((5, 3)), dtype="float64")
    w = mta.tensor(rng.standard_normal((3, 4)), dtype="float64", requires_grad=True)
    b = mta.tensor(rng.standard_normal(4), dtype="float64", requires_grad=True)
    loss = ((x @ w + b).tanh() @ w.mT).sum()  # w is used twice: done only after its second use
    expected = loss.backward(retain_graph=True)

    sink = _RecordingSink(fuses_gemm, listens=True)
    run_backward(loss, sink=sink)
    for leaf in (w, b):
        np.testing.assert_allclose(sink.sums[id(leaf)], expected[leaf], rtol=1e-12)
    kinds = {kind for kind, leaf in sink.events if leaf == id(w) and kind != "done"}
    assert kinds == ({"product", "add"} if fuses_gemm else {"add"})  # x @ w fuses, w.mT (a Permute) cannot
    assert ("product", id(b)) not in sink.events  # an Add gives no factors: Function.grad_factors is None
    for leaf in (w, b):
        done = [i for i, event in enumerate(sink.events) if event == ("done", id(leaf))]
        assert len(done) == 1 and all(i < done[0] for i, event in enumerate(sink.events) if event[1] == id(leaf)
                                      and event[0] != "done")


def test_a_sink_that_does_not_listen_hears_nothing_and_still_gets_every_gradient() -> None:
    w = mta.tensor([[1.0, 2.0], [3.0, 4.0]], dtype="float64", requires_grad=True)
    loss = (w @ w).sum()
    expected = loss.backward(retain_graph=True)[w]
    sink = _RecordingSink(fuses_gemm=True, listens=False)
    assert sink.leaf_done is None  # LeafSink's default
    run_backward(loss, sink=sink)
    np.testing.assert_allclose(sink.sums[id(w)], expected, rtol=1e-12)
    assert [kind for kind, _ in sink.events] == ["product", "product"]  # both sides of w @ w, no "done"

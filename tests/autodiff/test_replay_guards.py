"""Capture and replay (autodiff/replay.py) where the mutation run of the replay module found the suite
blind: guard keys that must tell apart three-way sharing patterns, a call that grows the model, the
default number of programs, long programs, ops that give no gradient, batched weights under a
GEMM-fusing sink, and the exact sentences a user reads when a call is refused."""

from __future__ import annotations

from typing import Any

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.autodiff import capture
from minitorch_accum.autodiff.graph import apply
from minitorch_accum.ops.function import Context, Function


def _x(rows: int = 3, seed: int = 0, cols: int = 4) -> mta.Tensor:
    return mta.tensor(np.random.default_rng(seed).normal(size=(rows, cols)))


def _grads(loss: mta.Tensor) -> dict[int, np.ndarray]:
    return {id(t): np.array(g) for t, g in loss.backward().items()}


def _same(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert np.array_equal(a[key], b[key])


class Three(nn.Module):
    """Three (4, 4) weights, each with its own factor: which array each reads shows in the loss."""

    def __init__(self) -> None:
        rng = np.random.default_rng(7)
        self.a = nn.Param(rng.normal(size=(4, 4)))
        self.b = nn.Param(rng.normal(size=(4, 4)))
        self.c = nn.Param(rng.normal(size=(4, 4)))

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return ((x @ self.a).tanh() + (x @ self.b) * 2.0 + (x @ self.c) * 3.0).sum()


# ---------------------------------------------------------------------- sharing patterns in the key
def test_model_tensors_sharing_the_first_then_the_second_array_are_other_keys() -> None:
    # replay_state lists them c, b, a: [c, b, c] and [c, b, b] share one array each, at the same
    # places (the third is no array of its own): only which one it shares tells them apart
    model = Three()
    assert model.replay_state()[0] == [model.c, model.b, model.a]
    step = capture(lambda x: model(x), model)
    model.a.data = model.c.data
    for seed in range(3):
        step(_x(seed=seed)).backward()
    assert step.last.outcome == "replayed"
    model.a.data = model.b.data
    _same(_grads(model(_x())), _grads(step(_x())))
    assert step.last.outcome == "captured"


def test_arguments_sharing_the_first_then_the_second_array_are_other_keys() -> None:
    model = Three()
    step = capture(lambda p, q, r: (model(p) + model(q) * 2.0 + model(r) * 3.0), model)
    x, y = _x(seed=3), _x(seed=4)
    for _ in range(3):
        step(x, y, x)
    assert step.last.outcome == "replayed"
    _same(_grads(model(x) + model(y) * 2.0 + model(y) * 3.0), _grads(step(x, y, y)))
    assert step.last.outcome == "captured"


def test_a_first_argument_that_was_the_models_first_tensor_and_is_not_now_is_another_key() -> None:
    class One(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Param(np.linspace(-1.0, 1.0, 16).reshape(4, 4))

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return (x @ self.w).tanh().sum()

    model = One()
    step = capture(lambda w, x: (x @ w).sum() + model(x), model)
    for _ in range(3):
        step(model.w, _x())  # the argument is the model's own (first) tensor: read from place 0
    assert step.last.outcome == "replayed"
    alone = mta.tensor(np.ones((4, 4)), requires_grad=True)
    eager = (_x() @ alone).sum() + model(_x())
    expected = _grads(eager)
    _same(expected, _grads(step(alone, _x())))
    assert step.last.outcome == "captured" and id(alone) in expected


class _Marked(np.ndarray):
    """An array of another type, which a function may branch on."""


def test_an_array_argument_of_another_type_is_another_key() -> None:
    model = Three()

    def fn(x: mta.Tensor, ids: np.ndarray) -> mta.Tensor:
        return model(x) * (2.0 if isinstance(ids, _Marked) else 1.0)

    ids = np.arange(3)
    step = capture(fn, model)
    for _ in range(3):
        step(_x(), ids)
    assert step.last.outcome == "replayed"
    marked = ids.view(_Marked)
    _same(_grads(fn(_x(), marked)), _grads(step(_x(), marked)))
    assert step.last.outcome == "captured"


def test_an_array_of_the_model_reshaped_in_place_is_another_key() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Param(np.linspace(-1.0, 1.0, 16).reshape(4, 4))
            self.mask = np.linspace(0.5, 2.0, 4)

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            weighted = (x @ self.w) * mta.from_numpy(self.mask)
            return weighted.sum() if self.mask.ndim == 1 else (weighted * 3.0).sum()  # Python reads the shape

    model = Masked()
    step = capture(lambda x: model(x), model)
    for _ in range(3):
        step(_x())
    assert step.last.outcome == "replayed"
    model.mask.shape = (1, 4)  # the same array object, another shape
    _same(_grads(model(_x())), _grads(step(_x())))
    assert step.last.outcome == "captured"


# ---------------------------------------------------------------------- calls that change the model
def test_a_call_that_adds_a_tensor_to_the_model_runs_eagerly_and_says_so() -> None:
    class Lazy(nn.Module):
        """A module that makes a buffer on its first call; its tensors come after the model's own."""

        def __init__(self) -> None:
            self.cache = nn.Module()  # popped last: its tensors are the last of replay_state's
            self.w = nn.Param(np.linspace(-1.0, 1.0, 16).reshape(4, 4))

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            if not hasattr(self.cache, "scale"):
                self.cache.scale = mta.tensor(np.full(4, 0.5))
            return ((x @ self.w) * self.cache.scale).sum()

    model = Lazy()
    step = capture(lambda x: model(x), model)
    loss = step(_x())
    assert len(model.replay_state()[0]) == 2 and model.replay_state()[0][-1] is model.cache.scale
    assert step.last.outcome == "eager"
    assert step.last.reason == ("the call assigned a tensor of the model (a parameter, a buffer or its array): "
                                "that Python must run every time")
    _same(_grads(model(_x())), _grads(loss))
    for _ in range(3):  # the model no longer changes: its calls replay
        step(_x()).backward()
    assert step.last.outcome == "replayed"


def test_a_call_that_changes_the_models_state_says_so_in_these_words() -> None:
    model = Three()

    def counting(x: mta.Tensor) -> mta.Tensor:
        model.calls = getattr(model, "calls", 0) + 1
        return model(x)

    step = capture(counting, model)
    for _ in range(2):
        step(_x())
    assert step.last.reason == ("the call changed the model's state (a module's attribute): that Python must run "
                                "every time")


# ---------------------------------------------------------------------- what the user reads
def test_refusals_say_these_sentences() -> None:
    model = Three()
    unkeyable = capture(lambda x, anything: model(x), model)
    unkeyable(_x(), object())
    assert unkeyable.last.reason == ("an argument of type object is not one a guard can compare: pass Tensors, "
                                     "arrays, numbers or strings (in tuples, lists or dicts)")
    number = capture(lambda x: 3, model)
    number(_x())
    assert number.last.reason == ("it returns a int: a replayed call can return only tensors (in tuples, lists or "
                                  "dicts with string keys); compute other values outside the captured function")
    calls = []

    def scaled(x: mta.Tensor) -> mta.Tensor:
        calls.append(1)
        return (x @ model.a).clamp(-float(len(calls)), 3.0).sum()  # a bound computed in Python, another each call

    parameter = capture(scaled, model)
    for _ in range(2):
        parameter(_x())
    assert parameter.last.reason == (
        "op 2 (clamp): its parameter 'low' differed between two calls, so it was computed in Python (from the inputs, "
        "or drawn at random outside an op) and a replay would repeat the first")

    def returning_a_count(x: mta.Tensor) -> tuple[mta.Tensor, mta.Tensor]:
        calls.append(1)
        return model(x), mta.tensor(np.full(2, float(len(calls))))  # made outside the ops, read by none

    constant = capture(returning_a_count, model)
    for _ in range(2):
        constant(_x())
    assert constant.last.reason == ("a constant of shape (2,) differed between two calls: it was computed in Python "
                                    "outside the ops (from the inputs?), and a replay would repeat the first")

    def reading_a_count(x: mta.Tensor) -> mta.Tensor:
        calls.append(1)
        return (model.a * mta.tensor(np.full((4, 4), float(len(calls))))).sum()

    read = capture(reading_a_count, model)
    for _ in range(2):
        read(_x())
    assert read.last.reason == ("a constant of shape (4, 4) read by op 1 (mul) differed between two calls: it was "
                                "computed in Python outside the ops (from the inputs?), and a replay would repeat "
                                "the first")


def test_the_default_replay_remembers_eight_keys() -> None:
    model = Three()
    step = capture(lambda x: model(x), model)
    for rows in range(1, 9):
        step(_x(rows))
    step(_x(1))
    assert step.last.outcome == "checked"  # eight keys: the first is still known
    for rows in range(2, 10):
        step(_x(rows))  # a ninth key: the least recently used (1 row) is forgotten
    step(_x(1))
    assert step.last.outcome == "captured"


# ---------------------------------------------------------------------- backward over the recorded steps
def test_a_program_of_hundreds_of_ops_whose_last_reads_a_result_twice_replays_as_eagerly() -> None:
    # step positions past 256 are ints that are not one object: the walk must know them by value,
    # or it reaches the step read twice again before the longer path's gradient has come
    def long(x: mta.Tensor) -> mta.Tensor:
        h = x
        for _ in range(300):
            h = h * 1.001
        return ((h * 2.0).tanh() + h).sum()

    x = mta.tensor(np.linspace(-1.0, 1.0, 6), requires_grad=True)
    step = capture(long)
    for _ in range(3):
        step(x)
    assert step.last.outcome == "replayed"
    _same(_grads(long(x)), _grads(step(x)))


class _Stopped(Function):
    """An op that passes its input through and gives it no gradient (None for an input that needs one)."""

    @staticmethod
    def forward(ctx: Context, a: Any) -> Any:
        return a * 1.0

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, ...]:
        return (None,)


def test_a_step_that_gets_no_gradient_is_skipped_as_eagerly() -> None:
    model = Three()

    def fn(x: mta.Tensor) -> mta.Tensor:
        return (apply(_Stopped, x @ model.a) + x @ model.b).sum()

    step = capture(fn, model)
    for _ in range(3):
        step(_x())
    assert step.last.outcome == "replayed"
    expected = _grads(fn(_x()))
    assert id(model.a) not in expected and id(model.b) in expected
    _same(expected, _grads(step(_x())))


class _Summing:
    """A sink that fuses GEMMs, keeping each leaf's gradient."""

    fuses_gemm = True

    def __init__(self) -> None:
        self.grads: dict[int, np.ndarray] = {}

    def accepts(self, leaf: Any) -> bool:
        return isinstance(leaf, nn.Param)

    def add(self, leaf: Any, grad: Any) -> None:
        self.grads[id(leaf)] = self.grads.get(id(leaf), 0) + grad

    def add_product(self, leaf: Any, a: Any, b: Any) -> None:
        self.add(leaf, a @ b)

    leaf_done = None


def test_a_batched_weight_under_a_gemm_fusing_sink_replays_as_eagerly() -> None:
    class Batched(nn.Module):
        def __init__(self) -> None:
            self.w = nn.Param(np.linspace(-1.0, 1.0, 24).reshape(2, 3, 4))  # left of a matmul: no GEMM factors
            self.v = nn.Param(np.linspace(0.5, -0.5, 20).reshape(4, 5))  # right of one: two GEMM factors

        def forward(self, x: mta.Tensor) -> mta.Tensor:
            return ((self.w @ x) @ self.v).tanh().sum()

    model = Batched()
    step = capture(lambda x: model(x), model)
    x = mta.tensor(np.random.default_rng(1).normal(size=(2, 4, 4)))
    for _ in range(3):
        mta.autodiff.run_backward(step(x), sink=_Summing())
    assert step.last.outcome == "replayed"
    eager, replayed = _Summing(), _Summing()
    mta.autodiff.run_backward(model(x), sink=eager)
    mta.autodiff.run_backward(step(x), sink=replayed)
    assert eager.grads.keys() == replayed.grads.keys() == {id(model.w), id(model.v)}
    for key in eager.grads:
        assert np.array_equal(eager.grads[key], replayed.grads[key])


def test_a_returned_view_of_the_first_ops_result_replays() -> None:
    step = capture(lambda x: (x * 2.0).T)
    x = mta.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    for _ in range(3):
        out = step(x)
    assert step.last.outcome == "replayed"
    assert np.array_equal(out.data, (x * 2.0).T.data)
    assert out._view_of is not None

"""Two captures of a call compared (autodiff/captured_program.py): a replay is allowed only when
they froze the same values, byte for byte, and the refusal names what differed. A comparison that
let a difference through would replay a value the function computed from its inputs in Python."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum.autodiff.captured_program import Program, Recorder, is_array, same_program, same_value
from minitorch_accum.autodiff.graph import CAPTURING
from minitorch_accum.nn import functional as F

A = np.arange(6.0).reshape(2, 3)


class _Sub(np.ndarray):
    """An ndarray of another type: the same bytes, yet not the same value."""


class _DeviceArray:
    """What a CuPy array shows a CPU-only run: ``__cuda_array_interface__``, a shape, a dtype, and an
    ``==`` that answers element by element."""

    __cuda_array_interface__: ClassVar[dict[str, Any]] = {}

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.shape = values.shape
        self.dtype = values.dtype

    def __eq__(self, other: object) -> Any:
        return self.values == other.values  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

SAME = [
    (A, A.copy()),
    (A.T, np.ascontiguousarray(A.T)),  # the same elements, another layout
    (np.float32(1.5), np.float32(1.5)),
    (float("nan"), float("nan")),
    (np.float64("nan"), np.float64("nan")),
    ((1, [2.0, A]), (1, [2.0, A.copy()])),
    ({"a": A, "b": None}, {"a": A.copy(), "b": None}),
    ("mean", "mean"),
    (np.dtype("float32"), np.dtype("float32")),
    (slice(1, 3), slice(1, 3)),
    (_DeviceArray(A), _DeviceArray(A.copy())),  # a device array, compared on its device
]

DIFFERENT = [
    (A, A + np.array(0.5)),
    (A, A.astype(np.float32)),
    (A, A.reshape(3, 2)),
    (A, A.tolist()),  # an array and a list of its values
    (A.tolist(), A),
    (1, 1.0),  # another type
    (True, 1),
    (1.0, float("nan")),
    (float("nan"), 1.0),
    ((1, 2), (1, 2, 3)),
    ((1, 2), (1, 3)),
    ([A], [A + np.array(1.0)]),
    ({"a": 1}, {"b": 1}),
    ({"a": 1}, {"a": 2}),
    ({"a": A}, {"a": A + np.array(1.0)}),
    (np.float32(1.5), np.float32(2.5)),
    ("sum", "mean"),
    (object(), object()),
    (A, A.view(_Sub)),  # the same bytes in an array of another type
    (_DeviceArray(A), _DeviceArray(A + np.array(0.5))),
    (_DeviceArray(A), A),
]


@pytest.mark.parametrize("a, b", SAME, ids=[f"same-{i}" for i in range(len(SAME))])
def test_values_that_are_the_same(a: Any, b: Any) -> None:
    assert same_value(a, b) and same_value(b, a)


@pytest.mark.parametrize("a, b", DIFFERENT, ids=[f"different-{i}" for i in range(len(DIFFERENT))])
def test_values_that_differ(a: Any, b: Any) -> None:
    assert not same_value(a, b)


def test_an_object_whose_equality_is_not_a_truth_value_is_not_the_same() -> None:
    class Elementwise:
        def __eq__(self, other: object) -> Any:
            return np.array([True, False])

    first = Elementwise()
    assert same_value(first, first) and not same_value(first, Elementwise())


def test_a_device_array_is_an_array_and_a_numpy_scalar_is_not() -> None:
    assert is_array(A) and is_array(_DeviceArray(A))
    assert not is_array(np.float64(1.0)) and not is_array([1.0])


def _program(fn: Any, *args: Any) -> Program:
    recorder = Recorder([], [a for a in args if isinstance(a, mta.Tensor | np.ndarray)])
    token = CAPTURING.set(recorder)
    try:
        out = fn(*args)
    finally:
        CAPTURING.reset(token)
    return recorder.program(out)


def _x(seed: int = 0) -> mta.Tensor:
    return mta.tensor(np.random.default_rng(seed).normal(size=(3, 4)), requires_grad=True)


def test_the_same_program_twice_is_the_same() -> None:
    def fn(x: mta.Tensor) -> Any:
        return ((x * 2.0).tanh() + 1.0).sum()

    assert same_program(_program(fn, _x(0)), _program(fn, _x(1))) is None


def test_another_path_is_named_by_its_ops() -> None:
    def short(x: mta.Tensor) -> Any:
        return x.tanh().sum()

    def long(x: mta.Tensor) -> Any:
        return x.tanh().exp().sum()

    def other(x: mta.Tensor) -> Any:
        return x.exp().sum()

    assert same_program(_program(short, _x()), _program(long, _x())) == (
        "the calls ran 2 and 3 ops: the function takes another path each time")
    assert same_program(_program(short, _x()), _program(other, _x())) == (
        "op 1 was tanh in one call and exp in the other")


def test_another_input_is_named() -> None:
    y = _x(5)

    def first(x: mta.Tensor, y: mta.Tensor) -> Any:
        return (x * y).sum()

    def second(x: mta.Tensor, y: mta.Tensor) -> Any:
        return (y * x).sum()

    assert same_program(_program(first, _x(), y), _program(second, _x(), y)) == (
        "op 1 (mul) read other inputs in the two calls")


def test_a_parameter_computed_from_the_inputs_is_named_with_the_op() -> None:
    def fn(x: mta.Tensor, y: np.ndarray) -> Any:
        return x.sum() * float(y.sum())  # a Python number from an input: a constant of the Mul

    def axis(x: mta.Tensor, y: np.ndarray) -> Any:
        return x.sum(axis=int(y[0])).sum()

    one, two = np.array([1, 0]), np.array([0, 0])
    why = same_program(_program(fn, _x(), one), _program(fn, _x(), two))
    assert why is not None and why.startswith("a constant of shape () read by op 2 (mul) differed between two calls")
    why = same_program(_program(axis, _x(), one), _program(axis, _x(), two))
    assert why is not None and why.startswith("op 1 (sum): its parameter 'axes' differed between two calls")
    assert same_program(_program(fn, _x(), one), _program(fn, _x(), np.array([0, 1]))) is None


def test_more_constants_or_other_outputs_are_named() -> None:
    def fewer(x: mta.Tensor) -> Any:
        return (x * x).sum()

    def more(x: mta.Tensor) -> Any:
        return (x * 2.0).sum()

    assert same_program(_program(fewer, _x()), _program(more, _x())) is not None
    assert same_program(_program(lambda x: (x * 2.0).sum(), _x()),
                        _program(lambda x: (x * 2.0 * 3.0).sum(), _x())) is not None

    def pair(x: mta.Tensor) -> Any:
        h = x.tanh()
        return h.sum(), h

    def swapped(x: mta.Tensor) -> Any:
        h = x.tanh()
        return h, h.sum()

    assert same_program(_program(pair, _x()), _program(swapped, _x())) == "the calls returned different things"


def test_the_calls_made_different_numbers_of_constants() -> None:
    first = _program(lambda x: (x * 2.0).sum(), _x())
    second = _program(lambda x: (x * 2.0).sum(), _x())
    second.constants.append(np.zeros(1))
    assert same_program(first, second) == "the calls made different numbers of constants (arrays made outside the ops)"


def test_a_cross_entropy_target_of_the_arguments_is_read_not_frozen() -> None:
    logits = _x()
    y = np.array([0, 1, 3])
    program = _program(lambda x, y: F.cross_entropy(x, y, reduction="sum"), logits, y)
    (step,) = [s for s in program.steps if s.fn.op_name() == "crossentropy"]
    assert step.array_params == (("targets", 1),) and "targets" not in step.params

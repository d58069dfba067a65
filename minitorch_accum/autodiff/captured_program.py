"""What a capture records: the program of one call, op by op, at the level of arrays.

While a capture is open (``graph.CAPTURING``), every op that runs tells the ``Recorder`` what
it ran: the Function, where each input array came from, its parameters, and what the graph
made of it. The result is a ``Program`` that ``replayed_graph.run_program`` can run again over
new inputs without the Python that called the ops (the model's modules, nn.functional's
checks, the Tensor objects, the graph's Nodes and Edges).

Every array a program reads lives in one list, the *environment*, in four parts: the tensors of
the model (``members``: its Params, Buffers and plain tensors, in ``Module.replay_state`` order),
the call's arguments (each Tensor or array, in the order ``flatten_arguments`` gives), the
*constants* (arrays the call made outside the ops, ``arange``'s, a causal mask), then each op's
result. A step reads its inputs by their index there; an array parameter of an op (Embedding's
ids, cross entropy's targets, BatchNorm's running statistics) that is one of those arrays is
read from there too; anything else an op was given is kept as it was (frozen).

What is frozen is the risk: an array or a number computed in Python from the inputs (a mean's
divisor counted from the targets, a mask drawn outside an op) would be replayed as it was at
the capture. The Replay captures a call twice before replaying it, and ``same_program``
refuses a pair whose frozen values differ (see replay.py).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from minitorch_accum.autodiff.graph import TensorBase, cast_dtype
from minitorch_accum.ops.function import Function

__all__ = ["CaptureRefusedError", "EdgeSpec", "Program", "Recorder", "Step", "is_array", "same_program", "same_value"]


class CaptureRefusedError(Exception):
    """What a call did that a program cannot replay (the message says what; the call itself ran)."""


def is_array(value: Any) -> bool:
    """A NumPy or CuPy array (a Tensor's ``data``), not a NumPy scalar."""
    return isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__")


@dataclass(frozen=True, slots=True)
class EdgeSpec:
    """One input of a recorded step, as backward sees it (graph.Edge, by index instead of by object):
    ``node`` the step that made it (when it needs a gradient and an op made it), ``leaf`` its index
    in the environment (a tensor of the model or an argument that requires grad), or neither."""

    requires_grad: bool
    shape: tuple[int, ...]
    dtype: Any
    backend: Any
    node: int | None
    leaf: int | None


@dataclass(slots=True)
class Step:
    """One op of the recorded call: what ran, on what, and what backward needs of it."""

    fn: type[Function]
    inputs: tuple[int, ...]  # environment index of each input array
    params: dict[str, Any]  # the op's parameters as they were (the frozen ones)
    array_params: tuple[tuple[str, int], ...]  # parameters read from the environment: (name, index)
    needs: tuple[bool, ...]  # each input's requires_grad
    record: bool  # whether the op made a graph node (grad mode on, an input that requires grad)
    cast: Any  # the dtype the result is cast to when its forward returned another (graph.cast_dtype)
    backend: Any  # the backend of the op's Context (its first input's)
    out_backend: Any  # the backend of its result (another one for a Transfer only)
    view_of: int | None  # the environment index of what its result views (Tensor.view_of), if anything
    scoped: bool = False  # whether its backend has a device scope to enter (CuPy)
    watch: tuple[int, ...] = ()  # inputs whose arrays the forward saved (by position): checked before backward
    edges: tuple[EdgeSpec, ...] = ()  # backward's view of the inputs (recorded steps only)
    frees: tuple[int, ...] = ()  # values read for the last time by this step (dropped after it)
    keeps_tensor: bool = False  # its result needs a Tensor object (returned, viewed by one, checked)


@dataclass
class Program:
    """A recorded call: the steps, the constants, which environment entries the call returns
    (``outputs``, a template of the returned structure with environment indices for tensors), and
    the model's tensors it was recorded with (weakly: a program never keeps a replaced layer alive)."""

    members: list[weakref.ref]
    arguments: int  # Tensors and arrays among the call's arguments
    constants: list[Any]  # arrays
    constant_tensors: list[TensorBase]
    steps: list[Step]
    outputs: Any = None
    #: arguments no backward reads (not a leaf that requires grad): a replayed graph lets them go
    #: when its forward ends, as an eager graph holds no input it does not backpropagate into
    unheld: tuple[int, ...] = ()
    walks: dict[int, Any] = field(default_factory=dict)  # backward's order from a root step (replayed_graph)

    @property
    def base(self) -> int:
        """The environment index of the first step's result."""
        return len(self.members) + self.arguments + len(self.constants)

    def holds(self, members: list[TensorBase]) -> bool:
        """Whether ``members`` are the very tensors the program was recorded with."""
        refs = self.members
        return len(refs) == len(members) and all(ref() is m for ref, m in zip(refs, members, strict=True))


#: recording numbers a step's result _RESULT + its position and a constant _CONSTANT + its number, as
#: their final places are not known until the call ends (``Recorder.program`` renumbers them)
_RESULT, _CONSTANT = 1 << 40, 1 << 50


class Recorder:
    """The open capture: ``graph.apply`` calls ``op`` after each op (see the module's docstring).

    ``members`` and ``arguments`` (the Tensors and arrays among the call's arguments) take the
    first environment indices. Results and arrays are found again by identity; results are held
    weakly, checked alive, so that the capture keeps no array alive longer than the call would."""

    def __init__(self, members: list[TensorBase], arguments: list[Any]) -> None:
        self.members = members
        self.arguments = arguments
        self.steps: list[Step] = []
        self.constants: list[Any] = []
        self.constant_tensors: list[TensorBase] = []
        #: the first thing the call did that a program cannot replay, or None
        self.refusal: str | None = None
        self._tensors: dict[int, tuple[Any, int]] = {}  # id(tensor) -> (it, or a weakref to it; its index)
        self._arrays: dict[int, tuple[Any, int]] = {}  # id(array) -> (it, or a weakref to it; its index)
        self._leaves = len(members) + len(arguments)
        for index, value in enumerate([*members, *arguments]):
            if isinstance(value, TensorBase):
                self._tensors[id(value)] = (value, index)
                value = value.data
            self._arrays.setdefault(id(value), (value, index))

    # ------------------------------------------------------------------ what apply calls
    def op(self, fn: type[Function], inputs: tuple[TensorBase, ...], params: dict[str, Any], result: Any) -> None:
        if self.refusal is not None:
            return
        try:
            self._record(fn, inputs, params, result)
        except CaptureRefusedError as why:
            self.refusal = f"op {len(self.steps) + 1} ({fn.op_name()}): {why}"

    def _record(self, fn: type[Function], inputs: tuple[TensorBase, ...], params: dict[str, Any],
                result: Any) -> None:
        sources = tuple([self._source(t) for t in inputs])
        frozen: dict[str, Any] = {}
        read: list[tuple[str, int]] = []
        for name, value in params.items():
            index = self._array_index(value) if is_array(value) else None
            if index is None:
                frozen[name] = value
            else:
                read.append((name, index))
        node = result._node
        first = inputs[0]
        step = Step(fn, sources, frozen, tuple(read), tuple([t.requires_grad for t in inputs]), node is not None,
                    cast_dtype(fn, first.data.dtype), first._backend, result._backend, None,
                    first._backend.has_device_scope)
        if node is not None:
            step.edges = tuple([self._edge(edge, t) for edge, t in zip(node.inputs, inputs, strict=True)])
            step.watch = tuple([entry[0] for entry in node.watched or ()])
        if result._view_of is not None:
            step.view_of = self._index_of(result._view_of)
        index = _RESULT + len(self.steps)
        self.steps.append(step)
        self._tensors[id(result)] = (weakref.ref(result), index)
        self._arrays[id(result.data)] = (_weakly(result.data), index)

    def _edge(self, edge: Any, tensor: TensorBase) -> EdgeSpec:
        node = leaf = None
        if edge.node is not None:
            index = self._tensor_index(tensor)
            if index is None or not _RESULT <= index < _CONSTANT:
                raise _foreign(tensor)
            node = index - _RESULT
        elif edge.leaf is not None:
            leaf = self._tensor_index(tensor)
            if leaf is None or leaf >= self._leaves:
                raise _foreign(tensor)
        return EdgeSpec(edge.requires_grad, edge.shape, edge.dtype, edge.backend, node, leaf)

    # ------------------------------------------------------------------ where arrays come from
    def _source(self, tensor: TensorBase) -> int:
        """The environment index of ``tensor``'s array (a new constant when it is none of them)."""
        index = self._array_index(tensor.data)
        if index is not None:
            return index
        if tensor.requires_grad:
            raise _foreign(tensor)
        index = _CONSTANT + len(self.constants)
        self.constants.append(tensor.data)
        self.constant_tensors.append(tensor)
        self._arrays[id(tensor.data)] = (tensor.data, index)
        self._tensors[id(tensor)] = (tensor, index)
        return index

    def _index_of(self, tensor: TensorBase) -> int:
        """``tensor`` by identity, else by its array (a constant when it is new)."""
        index = self._tensor_index(tensor)
        return self._source(tensor) if index is None else index

    def _output(self, tensor: TensorBase) -> tuple[str, Any]:
        """A returned tensor: ``("tensor", index)`` when it is one the call got or made, ``("alias",
        (index, viewed))`` for another tensor of such an array (a ``detach()``: the array at ``index``,
        counting the writes of ``viewed``)."""
        index = self._tensor_index(tensor)
        if index is not None:
            return ("tensor", index)
        if tensor.requires_grad:
            raise _foreign(tensor)
        index = self._array_index(tensor.data)
        if index is None:
            return ("tensor", self._source(tensor))  # made outside the ops: a constant
        viewed = None if tensor._view_of is None else self._index_of(tensor._view_of)
        return ("alias", (index, viewed))

    def _array_index(self, array: Any) -> int | None:
        return _held_index(self._arrays.get(id(array)), array)

    def _tensor_index(self, tensor: Any) -> int | None:
        return _held_index(self._tensors.get(id(tensor)), tensor)

    # ------------------------------------------------------------------ the end of the call
    def program(self, outputs: Any) -> Program:
        """The program of the call that returned ``outputs`` (CaptureRefusedError when it cannot be replayed)."""
        if self.refusal is not None:
            raise CaptureRefusedError(self.refusal)
        template = _template(outputs, self._output)
        fixed = self._leaves
        base = fixed + len(self.constants)

        def renumber(index: int) -> int:
            if index >= _CONSTANT:
                return fixed + index - _CONSTANT
            if index >= _RESULT:
                return base + index - _RESULT
            return index

        for step in self.steps:
            step.inputs = tuple([renumber(i) for i in step.inputs])
            step.array_params = tuple([(name, renumber(i)) for name, i in step.array_params])
            step.view_of = None if step.view_of is None else renumber(step.view_of)
        program = Program([weakref.ref(m) for m in self.members], len(self.arguments), self.constants,
                          self.constant_tensors, self.steps, _map_template(template, renumber))
        _plan_lifetimes(program)
        for index in output_indices(program.outputs):
            if fixed <= index < base:  # a constant the caller got: the program keeps its own
                constant = self.constant_tensors[index - fixed]
                program.constants[index - fixed] = constant.data.copy()
                program.constant_tensors[index - fixed] = constant.wrap(program.constants[index - fixed])
        return program


def _foreign(tensor: TensorBase) -> CaptureRefusedError:
    """What to say of an input that requires grad and that the call did not get or make."""
    if tensor._node is not None:
        return CaptureRefusedError(f"an input of shape {tensor.shape} that requires grad was made by ops outside "
                                   "this call: compute it inside, or pass it as an argument (a leaf: detach it)")
    return CaptureRefusedError(f"an input of shape {tensor.shape} requires grad but is neither a tensor of the model "
                               "nor an argument: a replay could not tell whether it is the same one next time; "
                               "pass it as an argument")


def _weakly(array: Any) -> Any:
    """A weak reference to ``array``; a NumPy scalar (a full reduction's result) cannot have one,
    and is held itself (it is a few bytes)."""
    try:
        return weakref.ref(array)
    except TypeError:
        return array


def _held_index(found: tuple[Any, int] | None, value: Any) -> int | None:
    """The index recorded for ``value`` when the entry found under its id is ``value`` itself
    (a result recorded weakly may have died and its id gone to another object)."""
    if found is None:
        return None
    ref, index = found
    held = ref() if isinstance(ref, weakref.ref) else ref
    return index if held is value else None


def _template(outputs: Any, leaf: Callable[[Any], tuple[str, Any]]) -> Any:
    """``outputs`` with each Tensor replaced by what ``leaf`` says of it: tuples, lists and dicts of
    tensors and None; anything else is refused (replay returns what the ops compute, nothing else)."""
    if isinstance(outputs, TensorBase):
        return leaf(outputs)
    if outputs is None:
        return None
    if isinstance(outputs, tuple | list):
        return (type(outputs).__name__, [_template(v, leaf) for v in outputs])
    if isinstance(outputs, dict) and all(isinstance(k, str) for k in outputs):
        return ("dict", {k: _template(v, leaf) for k, v in outputs.items()})
    raise CaptureRefusedError(f"it returns a {type(outputs).__name__}: a replayed call can return only tensors (in "
                              "tuples, lists or dicts with string keys); compute other values outside the captured "
                              "function")


def _map_template(template: Any, renumber: Callable[[int], int]) -> Any:
    if template is None:
        return None
    kind, body = template
    if kind == "tensor":
        return (kind, renumber(body))
    if kind == "alias":
        index, viewed = body
        return (kind, (renumber(index), None if viewed is None else renumber(viewed)))
    if kind == "dict":
        return (kind, {k: _map_template(v, renumber) for k, v in body.items()})
    return (kind, [_map_template(v, renumber) for v in body])


def output_indices(template: Any) -> list[int]:
    """The environment indices a template returns or views, in order."""
    if template is None:
        return []
    kind, body = template
    if kind == "tensor":
        return [body]
    if kind == "alias":
        return [i for i in body if i is not None]
    values = body.values() if kind == "dict" else body
    return [i for v in values for i in output_indices(v)]


def _plan_lifetimes(program: Program) -> None:
    """Which values each step reads for the last time (dropped after it, so a replay keeps no
    more arrays alive than the eager call did), and which results need a Tensor object: the
    returned ones, what they view, and the inputs whose saved arrays are checked."""
    base = program.base
    last: dict[int, int] = {}
    needs_tensor = set(output_indices(program.outputs))
    for position, step in enumerate(program.steps):
        for index in (*step.inputs, *(i for _, i in step.array_params)):
            if index >= base:
                last[index] = position
        for position_in in step.watch:
            needs_tensor.add(step.inputs[position_in])
    # what a tensor that is needed views needs a tensor too (its writes are counted there)
    for position in range(len(program.steps) - 1, -1, -1):
        step = program.steps[position]
        if base + position in needs_tensor and step.view_of is not None:
            needs_tensor.add(step.view_of)
    frees: dict[int, list[int]] = {}
    for index, position in last.items():  # a result that has a Tensor lives on in it while that is held
        frees.setdefault(position, []).append(index)
    for position, step in enumerate(program.steps):
        step.frees = tuple(frees.get(position, ()))
        step.keeps_tensor = base + position in needs_tensor
    leaves = {edge.leaf for step in program.steps for edge in step.edges}
    fixed = len(program.members)
    program.unheld = tuple([i for i in range(fixed, fixed + program.arguments) if i not in leaves])


# ---------------------------------------------------------------------- two captures compared
def same_value(a: Any, b: Any) -> bool:
    """Whether two frozen values are the same: arrays byte for byte (with their dtype and shape),
    containers item by item, floats with nan equal to nan, other objects by equality."""
    if is_array(a) or is_array(b):
        if not (is_array(a) and is_array(b)) or type(a) is not type(b):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if isinstance(a, np.ndarray):
            return bool(np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())
        return bool((a == b).all())  # a CuPy array, compared on its device
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, float | np.floating):
        return bool(a == b or (a != a and b != b))
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # an object whose == is not a truth value (an array-like): not the same
        return False


def same_program(a: Program, b: Program) -> str | None:
    """None when two captures of a call recorded the same program; else the first difference,
    said for the user (which op, which value), the reason replay is refused."""
    if len(a.steps) != len(b.steps):
        return f"the calls ran {len(a.steps)} and {len(b.steps)} ops: the function takes another path each time"
    if len(a.constants) != len(b.constants):
        return "the calls made different numbers of constants (arrays made outside the ops)"
    for number, (x, y) in enumerate(zip(a.steps, b.steps, strict=True), 1):
        where = f"op {number} ({x.fn.op_name()})"
        if x.fn is not y.fn:
            return f"op {number} was {x.fn.op_name()} in one call and {y.fn.op_name()} in the other"
        if (x.inputs, x.array_params, x.needs, x.record, x.watch, x.view_of, x.edges) != \
                (y.inputs, y.array_params, y.needs, y.record, y.watch, y.view_of, y.edges) \
                or x.backend is not y.backend or x.out_backend is not y.out_backend or x.cast != y.cast:
            return f"{where} read other inputs in the two calls"
        if x.params.keys() != y.params.keys():
            return f"{where} was given other parameters in the two calls"
        for name in x.params:
            if not same_value(x.params[name], y.params[name]):
                return (f"{where}: its parameter {name!r} differed between two calls, so it was computed in Python "
                        "(from the inputs, or drawn at random outside an op) and a replay would repeat the first")
    for number, (x, y) in enumerate(zip(a.constants, b.constants, strict=True), 1):
        if not same_value(x, y):
            used = next((f" read by op {n} ({s.fn.op_name()})" for n, s in enumerate(a.steps, 1)
                         if a.base - len(a.constants) + number - 1 in s.inputs), "")
            return (f"a constant of shape {tuple(x.shape)}{used} differed between two calls: it was computed in "
                    "Python outside the ops (from the inputs?), and a replay would repeat the first")
    if a.outputs != b.outputs:
        return "the calls returned different things"
    return None

"""Capture a call once, replay it: a micro-batch without the model's Python (tinygrad's TinyJit,
a CUDA graph, for a window of micro-batches).

    step = mta.autodiff.capture(lambda x, y: F.cross_entropy(model(x), y, reduction="sum"), model)
    for x, y in micro_batches:
        acc.backward(step(x, y), num_items=y.size)    # or loss = step(x, y); loss.backward()

Every micro-batch of a window runs the same ops on arrays of the same shapes. The first call with
a new *guard key* runs eagerly and is recorded (captured_program.py: each op's Function, where its inputs
came from, its parameters); the second runs eagerly too, and its record is compared with the
first: a value the two froze differently (a divisor counted from the targets, a mask drawn
outside an op) means the function computes from its inputs in Python, which a replay would
skip, so that key is refused and runs eagerly, and the report says which op and which value.
From the third call on, the program is replayed (replayed_graph.py): the same Function
forwards and backwards on the new arrays, in the same order, bit for bit an eager call's,
without the modules' Python, nn.functional's checks, or the graph's objects.

The guard key: each argument's kind, shape, dtype, device and requires_grad (numbers and
strings by value), grad mode, every tensor of the model (``Module.replay_state``: its
Params, Buffers and plain tensors by identity, with their requires_grad, shape, dtype and
device) and the rest of its modules' state (training flags, numbers, strings, other objects).
Anything else (a branch on a global, a closure's tensor) is frozen at the capture: keep it out
of the captured function, or call ``clear()`` when it changes.

What a replayed call does as an eager one would: it reads each tensor of the model afresh (an
in-place edit between calls, an optimizer step, a parameter rebound), draws dropout's masks from
the generator in the same order (the draw is inside the op), runs the check of saved inputs
(an in-place write between forward and backward is refused), returns tensors whose backward
frees their own graph (a tensor of an earlier call is refused as eagerly), and keeps no array
of an earlier call. A call that raises leaves the replay as it was; the next one starts over.

Each call says how it ran (``last``, ``counts``, ``listener``): ``captured``, ``checked``
(the second capture agreed: the next call replays), ``replayed``, or ``eager`` with the reason,
``first`` when the Replay gives that reason for the first time (say it once).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from minitorch_accum.autodiff.captured_program import CaptureRefusedError, Program, Recorder, is_array, same_program
from minitorch_accum.autodiff.grad_mode import is_grad_enabled
from minitorch_accum.autodiff.graph import CAPTURING, TensorBase
from minitorch_accum.autodiff.replayed_graph import run_program

__all__ = ["REPLAY_OUTCOMES", "Replay", "ReplayModel", "ReplayReport", "capture", "flatten_arguments"]

#: how a call ran: recorded (eagerly) / recorded again and found the same / replayed / eager, with a reason
REPLAY_OUTCOMES = ("captured", "checked", "replayed", "eager")


@dataclass(frozen=True)
class ReplayReport:
    """How one call ran (one of REPLAY_OUTCOMES); for ``eager``, ``reason``, and ``first`` when this
    Replay gives that reason for the first time."""

    outcome: str
    reason: str | None = None
    first: bool = False


class ReplayModel(Protocol):
    """What a Replay guards of a model (``nn.Module`` has it)."""

    def replay_state(self) -> tuple[list[Any], tuple[Any, ...]]:
        """Every tensor (and array) the model holds, each once in a stable order, and the rest of
        its state as a hashable tuple (its modules' training flags, numbers, other objects)."""


class _UnkeyableError(Exception):
    """An argument a guard key cannot hold."""


def flatten_arguments(args: tuple[Any, ...]) -> tuple[list[Any], tuple[Any, ...]]:
    """(the Tensors and arrays among ``args``, in order; the guard key of ``args``): tuples, lists
    and dicts are searched, numbers, strings, bools and None are part of the key."""
    found: list[Any] = []

    def key_of(value: Any) -> Any:
        if isinstance(value, TensorBase):
            found.append(value)
            data = value.data
            return (0, data.shape, data.dtype, value._backend, value.requires_grad, value._node is None)
        if is_array(value):
            found.append(value)
            return (1, type(value), value.shape, value.dtype)
        if value is None or isinstance(value, bool | int | float | str):
            return (2, type(value), value)
        if isinstance(value, tuple | list):
            return (3, type(value), tuple([key_of(v) for v in value]))
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return (4, tuple([(k, key_of(v)) for k, v in value.items()]))
        raise _UnkeyableError(f"an argument of type {type(value).__name__} is not one a guard can compare: pass "
                              "Tensors, arrays, numbers or strings (in tuples, lists or dicts)")

    key = tuple([key_of(a) for a in args])
    return found, key


#: what a Replay knows of a guard key: recorded once / recorded twice alike (replays) / refused
_CAPTURED, _READY, _REFUSED = "captured", "ready", "refused"


class _Entry:
    __slots__ = ("program", "reason", "state")

    def __init__(self, state: str, program: Program | None, reason: str | None = None) -> None:
        self.state = state
        self.program = program
        self.reason = reason


class Replay:
    """``fn`` captured and replayed (see the module's docstring): call it as ``fn``.

    Args:
        fn: the call to capture; it takes Tensors, arrays, numbers (in tuples, lists, dicts) and
            returns tensors (in tuples, lists, dicts with string keys).
        model: what ``fn`` computes with (``replay_state()``: an nn.Module), or None when every
            tensor that requires grad comes in as an argument.
        enabled: False runs every call eagerly.
        max_programs: guard keys remembered (the least recently used is forgotten).
        listener: called with each call's ``ReplayReport``.
    """

    def __init__(self, fn: Callable[..., Any], model: ReplayModel | None = None, *, enabled: bool = True,
                 max_programs: int = 8, listener: Callable[[ReplayReport], None] | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"Replay: fn must be callable, got {type(fn).__name__}")
        if model is not None and not callable(getattr(model, "replay_state", None)):
            raise TypeError(f"Replay: model must have replay_state() (an nn.Module), got {type(model).__name__}")
        if isinstance(max_programs, bool) or not isinstance(max_programs, int) or max_programs < 1:
            raise ValueError(f"Replay: max_programs must be a positive int, got {max_programs!r}")
        self.fn = fn
        self.model = model
        self.enabled = enabled
        self.max_programs = max_programs
        self.listener = listener
        #: calls by outcome (REPLAY_OUTCOMES)
        self.counts: dict[str, int] = dict.fromkeys(REPLAY_OUTCOMES, 0)
        #: how the latest call ran (None before the first)
        self.last: ReplayReport | None = None
        self._entries: OrderedDict[Any, _Entry] = OrderedDict()
        self._reasons: set[str] = set()

    def __call__(self, *args: Any) -> Any:
        if not self.enabled:
            return self._eagerly(args, "replay is off")
        if CAPTURING.get() is not None:
            return self._eagerly(args, "called inside another capture, which records its ops itself")
        members, state = self._state()
        try:
            arguments, arguments_key = flatten_arguments(args)
        except _UnkeyableError as why:
            return self._eagerly(args, str(why))
        key = (arguments_key, is_grad_enabled(), state, *_tensors_key(members, arguments))
        entry = self._entries.get(key)
        if entry is not None and entry.program is not None and not entry.program.holds(members):
            entry = None  # the same kind of model, other tensors (a layer replaced): capture afresh
        if entry is None:
            return self._capture(key, None, args, members, arguments, state)
        self._entries.move_to_end(key)
        if entry.state == _READY:
            assert entry.program is not None
            outputs = run_program(entry.program, members, arguments)
            self._report("replayed")
            return outputs
        if entry.state == _REFUSED:
            return self._eagerly(args, entry.reason)
        return self._capture(key, entry, args, members, arguments, state)

    def clear(self) -> None:
        """Forget every capture: the next call captures afresh."""
        self._entries.clear()

    # ------------------------------------------------------------------ capture
    def _capture(self, key: Any, entry: _Entry | None, args: tuple[Any, ...], members: list[Any],
                 arguments: list[Any], state: tuple[Any, ...]) -> Any:
        """Run ``fn`` eagerly, recorded; the first capture of ``key`` is kept, a second one compared with
        it. A call that raises changes nothing: the next call of its key does what this one would have."""
        recorder = Recorder(members, arguments)
        arrays = [_array(m) for m in members]
        token = CAPTURING.set(recorder)
        try:
            outputs = self.fn(*args)
        finally:
            CAPTURING.reset(token)
        reason = _changed_model(self._state(), members, arrays, state)
        program = None
        if reason is None:
            try:
                program = recorder.program(outputs)
            except CaptureRefusedError as why:
                reason = str(why)
        if reason is None and entry is not None and entry.program is not None:
            reason = same_program(entry.program, program)  # type: ignore[arg-type]
            if reason is None:
                self._remember(key, _Entry(_READY, program))
                self._report("checked")
                return outputs
        if reason is not None:
            self._remember(key, _Entry(_REFUSED, program, reason))
            self._report("eager", reason)
            return outputs
        self._remember(key, _Entry(_CAPTURED, program))
        self._report("captured")
        return outputs

    def _remember(self, key: Any, entry: _Entry) -> None:
        self._entries[key] = entry
        while len(self._entries) > self.max_programs:
            self._entries.popitem(last=False)

    # ------------------------------------------------------------------ the rest
    def _state(self) -> tuple[list[Any], tuple[Any, ...]]:
        return ([], ()) if self.model is None else self.model.replay_state()

    def _eagerly(self, args: tuple[Any, ...], reason: str | None) -> Any:
        outputs = self.fn(*args)
        self._report("eager", reason)
        return outputs

    def _report(self, outcome: str, reason: str | None = None) -> None:
        first = reason is not None and reason not in self._reasons
        if first:
            self._reasons.add(reason)  # type: ignore[arg-type]
        report = ReplayReport(outcome, reason, first)
        self.last = report
        self.counts[outcome] += 1
        if self.listener is not None:
            self.listener(report)

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts.items() if v)
        return f"Replay({getattr(self.fn, '__qualname__', type(self.fn).__name__)}{', ' + counts if counts else ''})"


def capture(fn: Callable[..., Any], model: ReplayModel | None = None, **options: Any) -> Replay:
    """``Replay(fn, model, **options)``: ``fn`` captured on its first calls and replayed after."""
    return Replay(fn, model, **options)


def _tensors_key(members: list[Any], arguments: list[Any]) -> tuple[tuple[Any, ...], tuple[tuple[int, int], ...]]:
    """The model's tensors as a guard sees them (shape, dtype, device, requires_grad; an array's shape,
    dtype and type), and which of them and of the arguments hold the same array as an earlier one, as
    (its place, the earlier one's): a program reads an array from the first place that held it at the
    capture, so calls that share arrays otherwise are calls of another key. One pass: it runs every call."""
    seen: dict[int, int] = {}
    shared = []
    described = []
    for place, value in enumerate(members):
        if isinstance(value, TensorBase):
            data = value.data
            described.append((data.shape, data.dtype, value._backend, value.requires_grad))
        else:
            data = value
            described.append((data.shape, data.dtype, type(data)))
        first = seen.setdefault(id(data), place)
        if first != place:
            shared.append((place, first))
    for place, value in enumerate(arguments, len(members)):
        first = seen.setdefault(id(_array(value)), place)
        if first != place:
            shared.append((place, first))
    return tuple(described), tuple(shared)


def _array(member: Any) -> Any:
    return member.data if isinstance(member, TensorBase) else member


def _changed_model(after: tuple[list[Any], tuple[Any, ...]], members: list[Any], arrays: list[Any],
                   state: tuple[Any, ...]) -> str | None:
    """Why the call cannot be replayed when it changed the model itself (a replay would not)."""
    now, now_state = after
    if len(now) != len(members) or any(a is not b for a, b in zip(now, members, strict=True)) \
            or any(_array(m) is not a for m, a in zip(now, arrays, strict=True)):
        return ("the call assigned a tensor of the model (a parameter, a buffer or its array): that Python "
                "must run every time")
    if now_state != state:
        return "the call changed the model's state (a module's attribute): that Python must run every time"
    return None

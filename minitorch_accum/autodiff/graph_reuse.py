"""Graph reuse: the graph of one micro-batch's forward, recorded once and refilled by the next.

Every micro-batch of a window runs the same ops on arrays of the same shapes, so the graph it
builds (a Node, a Context and an Edge per input for every op, the backward's topological order)
is the same each time. ``GraphReuse.forward()`` keeps those objects: the first forward is
recorded as a path of entries (each op, where each input came from, the output's shape and
dtype); a later forward that runs the same ops on the same kinds of inputs refills the recorded
nodes instead of making new ones, and its backward walks the order computed the first time.

What is reused is bookkeeping, never a value: the forward's Python code runs every time (its
branches, its dropout masks, its side effects are all seen), every op computes its output and
what it saves afresh from the arrays it is given, and backward computes from those, in the same
order, with the same operations: the gradients are bit for bit those of an eager forward.

An op is replayed only when it is the next recorded op and each input is what it was: the
output of the same recorded op *in this forward*, the same leaf (same shape, dtype and device),
or a constant of the same shape, dtype and device; and its output has the recorded shape and
dtype. Anything else (another shape, another branch, a parameter that stopped requiring grad,
a tensor from an earlier micro-batch) ends the replay at that op: the rest of the forward runs
eagerly and is recorded as a branch beside the old path (a partial last micro-batch, a model
that alternates between two paths: each gets its own branch). A recorded node is refilled only
when the whole graph that last used it has been freed by its backward; while it is still alive
(no backward yet, ``retain_graph=True``) the forward runs eagerly without recording. Each forward
says which way it ran: ``last`` (a ``ReuseReport``), ``counts``, and ``listener`` (called with each
report), for traces and ``maccum explain``.

A check that a saved array was not changed in place between forward and backward (a version
per saved tensor, taken in ``Context.save``) needs nothing here: a replayed op saves through
its refilled Context's ``save`` like an eager one. One taken in ``apply`` or ``Node`` instead
belongs in ``_Pass._replay`` too, beside ``node.inputs = entry.edges``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from minitorch_accum.autodiff.grad_mode import silence_float_errors
from minitorch_accum.autodiff.graph import REUSE_PASS, Node, TensorBase, forward_arrays
from minitorch_accum.ops.function import Context, Function

__all__ = ["REUSE_OUTCOMES", "GraphReuse", "ReuseReport"]

#: how a forward ran: every op refilled a recorded node / some did, the rest ran eagerly / none did
REUSE_OUTCOMES = ("replayed", "partly_replayed", "recorded", "eager")

# where an input of a recorded op came from
_NODE, _LEAF, _CONSTANT, _FOREIGN = 0, 1, 2, 3


@dataclass(frozen=True)
class ReuseReport:
    """How one forward ran: ``outcome`` (one of REUSE_OUTCOMES), how many ops refilled recorded
    nodes (``replayed_ops``) and how many ran eagerly (``eager_ops``), and, when not every op
    was replayed, ``reason``: the first op that was not, and why."""

    outcome: str
    replayed_ops: int
    eager_ops: int
    reason: str | None


class _Entry:
    """One recorded op: what it was, where its inputs came from, its node, and what follows."""

    __slots__ = ("edges", "fn", "needs", "node", "out_dtype", "out_shape", "plan", "sources", "successors")

    def __init__(self, fn: type[Function], needs: tuple[bool, ...], sources: tuple[tuple[Any, ...], ...],
                 node: Node, out: Any) -> None:
        self.fn = fn
        self.needs = needs
        self.sources = sources
        self.node = node
        self.edges = node.inputs
        self.out_shape = tuple(out.shape)
        self.out_dtype = out.dtype
        self.successors: list[_Entry] = []
        self.plan: tuple[list[Node], dict[int, list[TensorBase]]] | None = None


class _Pass:
    """One forward under ``GraphReuse.forward()``: the owner of every node it filled or made.

    ``live`` counts those nodes that backward has not freed yet: the nodes can be refilled by a
    later forward only when it is 0. Each node it fills remembers (``Node.made``) the id of the
    tensor made with it, so that a tensor of an earlier forward holding the same node is told
    apart from the current one."""

    __slots__ = ("at", "busy", "eager_ops", "live", "reason", "recording", "replayed_ops", "reuse")

    def __init__(self, reuse: GraphReuse) -> None:
        self.reuse = reuse
        self.at: _Entry | None = None  # the last entry on this forward's path (None: at the start)
        self.recording = False  # True once an op did not match: the rest is recorded as a branch
        self.busy = False  # True once a recorded node was still in use: the rest runs eagerly, unrecorded
        self.live = 0
        self.replayed_ops = 0
        self.eager_ops = 0
        self.reason: str | None = None

    # ---------------------------------------------------------------- what nodes call
    def node_freed(self) -> None:
        self.live -= 1

    def plan(self, node: Node) -> tuple[list[Node], dict[int, list[TensorBase]]] | None:
        entry = self.reuse.entry_of(node)
        return None if entry is None else entry.plan

    def keep_plan(self, node: Node, order: list[Node], finishing: dict[int, list[TensorBase]]) -> None:
        """Remember the backward order from ``node`` if every node in it is this forward's."""
        entry = self.reuse.entry_of(node)
        if entry is not None and all(n.owner is self for n in order):
            entry.plan = (order, finishing)

    # -------------------------------------------------------------- what apply calls
    def apply(self, fn: type[Function], inputs: tuple[TensorBase, ...], params: dict[str, Any],
              needs: tuple[bool, ...]) -> Any:
        if not (self.recording or self.busy):
            candidates = self.reuse.starts if self.at is None else self.at.successors
            for entry in candidates:
                if entry.fn is fn and entry.needs == needs and _inputs_match(entry.sources, inputs):
                    owner = entry.node.owner
                    if owner is not None and owner is not self and owner.live:
                        self.busy = True
                        self._stop(entry, "the graph of an earlier forward that used this op's node is still "
                                          "alive (no backward yet, or backward(retain_graph=True))")
                        break
                    return self._replay(entry, inputs, params)
            else:
                self.recording = True
                self._stop(None, _mismatch(fn, inputs, candidates))
        ctx = Context(inputs[0].backend, needs)
        out = forward_arrays(fn, ctx, inputs, params)
        return self._eager(fn, inputs, needs, Node(fn, ctx, inputs), out)

    def _eager(self, fn: type[Function], inputs: tuple[TensorBase, ...], needs: tuple[bool, ...], node: Node,
               out: Any) -> Any:
        """The result of an op that ran eagerly in this forward; recorded unless the forward is busy."""
        self.eager_ops += 1
        result = inputs[0].wrap(out, node)
        if not self.busy:
            entry = _Entry(fn, needs, tuple([self._source(t) for t in inputs]), node, out)
            (self.reuse.starts if self.at is None else self.at.successors).insert(0, entry)  # newest first
            self.reuse.adopt(entry)
            node.owner = self
            node.made = id(result)
            self.live += 1
            self.at = entry
        return result

    def _replay(self, entry: _Entry, inputs: tuple[TensorBase, ...], params: dict[str, Any]) -> Any:
        """Refill ``entry``'s node from this op (made eagerly when its output does not have the
        recorded shape and dtype, since the recorded consumers' edges would not fit it)."""
        node = entry.node
        ctx = node.ctx  # released by the last backward: nothing saved, no attributes
        ctx.needs_input_grad = entry.needs
        out = forward_arrays(entry.fn, ctx, inputs, params)
        if out.shape != entry.out_shape or out.dtype != entry.out_dtype:
            node.ctx = Context(ctx.backend, entry.needs)
            self.recording = True
            self._stop(entry, f"its result has shape {tuple(out.shape)} ({out.dtype.name}), recorded "
                              f"{entry.out_shape} ({entry.out_dtype.name})")
            return self._eager(entry.fn, inputs, entry.needs, Node(entry.fn, ctx, inputs), out)
        node.inputs = entry.edges
        node.freed = False
        node.watch_saved(inputs)  # the version check sees this forward's saved arrays
        node.owner = self
        self.live += 1
        self.at = entry
        self.replayed_ops += 1
        result = inputs[0].wrap(out, node)
        node.made = id(result)
        return result

    def _source(self, tensor: TensorBase) -> tuple[Any, ...]:
        node = tensor.grad_fn
        data = tensor.data
        if node is None:
            kind = _LEAF if tensor.requires_grad else _CONSTANT
            return (kind, tensor if kind == _LEAF else None, tuple(data.shape), data.dtype, tensor.backend)
        if node.owner is self and node.made == id(tensor):
            return (_NODE, node, None, None, None)
        return (_FOREIGN, None, None, None, None)

    def _stop(self, entry: _Entry | None, why: str) -> None:
        if self.reason is None:
            where = f"op {self.replayed_ops + self.eager_ops + 1}"
            self.reason = f"{where}: {why}" if entry is None else f"{where} ({entry.fn.op_name()}): {why}"

    def report(self) -> ReuseReport:
        if self.eager_ops == 0:
            outcome = "replayed" if self.replayed_ops else "eager"
        else:
            outcome = "partly_replayed" if self.replayed_ops else ("eager" if self.busy else "recorded")
        if outcome == "eager" and self.reason is None and not self.replayed_ops:
            self.reason = "no op recorded a node (no_grad, or nothing that requires grad)"
        return ReuseReport(outcome, self.replayed_ops, self.eager_ops, self.reason)


def _inputs_match(sources: tuple[tuple[Any, ...], ...], inputs: tuple[TensorBase, ...]) -> bool:
    """Whether each input is what the recorded op had there (see the module's docstring)."""
    for tensor, (kind, ref, shape, dtype, backend) in zip(inputs, sources, strict=True):
        node = tensor._node
        if kind == _NODE:
            if node is not ref or node.made != id(tensor):
                return False
        elif kind == _FOREIGN or tensor._backend is not backend or node is not None:
            return False
        else:
            data = tensor.data
            if data.shape != shape or data.dtype != dtype or (kind == _LEAF and tensor is not ref):
                return False
    return True


def _mismatch(fn: type[Function], inputs: tuple[TensorBase, ...], candidates: list[_Entry]) -> str:
    shapes = ", ".join(str(t.shape) for t in inputs)
    if not candidates:
        return f"{fn.op_name()}{'' if inputs else '()'} on {shapes}: nothing recorded here yet"
    recorded = ", ".join(sorted({e.fn.op_name() for e in candidates}))
    return f"{fn.op_name()} on {shapes} is not what was recorded at this point ({recorded}, or its inputs differ)"


class GraphReuse:
    """Records the graph of a micro-batch's forward and refills it in the next ones (see the
    module's docstring)::

        reuse = GraphReuse()
        for x, y in micro_batches:
            with reuse.forward():
                loss = F.cross_entropy(model(x), y, reduction="sum")
            acc.backward(loss, num_items=len(y))   # or loss.backward()
        reuse.last.outcome, reuse.counts             # "replayed", {"replayed": 7, "recorded": 1, ...}

    ``max_entries`` bounds the recorded ops over all branches; past it the record starts over.
    """

    def __init__(self, max_entries: int = 20_000) -> None:
        if max_entries < 1:
            raise ValueError(f"GraphReuse: max_entries must be positive, got {max_entries}")
        self.max_entries = max_entries
        self.starts: list[_Entry] = []  # the first op of each recorded path
        self._entries: dict[int, _Entry] = {}  # id(node) -> its entry (the entries keep the nodes alive)
        #: forwards by outcome (REUSE_OUTCOMES)
        self.counts: dict[str, int] = dict.fromkeys(REUSE_OUTCOMES, 0)
        #: how the latest forward ran (None before the first)
        self.last: ReuseReport | None = None
        #: called with each forward's report as it ends (a trace, a progress line), or None
        self.listener: Callable[[ReuseReport], None] | None = None

    @property
    def recorded_ops(self) -> int:
        """Ops recorded over every branch."""
        return len(self._entries)

    def entry_of(self, node: Node) -> _Entry | None:
        return self._entries.get(id(node))

    def adopt(self, entry: _Entry) -> None:
        if len(self._entries) >= self.max_entries:
            self.clear()
        self._entries[id(entry.node)] = entry

    def clear(self) -> None:
        """Forget every recorded path: the next forward records afresh."""
        self.starts = []
        self._entries = {}

    @contextmanager
    def forward(self) -> Iterator[None]:
        """One micro-batch's forward: its ops replay the recorded graph where they match it and
        are recorded where they do not. NumPy's floating-point warnings are off inside (inf and
        nan are results, as for every op)."""
        if REUSE_PASS.get() is not None:
            raise RuntimeError("GraphReuse.forward(): a forward is already open in this context")
        current = _Pass(self)
        token = REUSE_PASS.set(current)
        try:
            with silence_float_errors():
                yield
        finally:
            REUSE_PASS.reset(token)
            report = current.report()
            self.last = report
            self.counts[report.outcome] += 1
            if self.listener is not None:
                self.listener(report)

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts.items() if v)
        return f"GraphReuse({self.recorded_ops} ops recorded{', ' + counts if counts else ''})"

"""A program run again over new inputs, and the graph its backward walks.

``run_program`` runs a captured program's steps (captured_program.py) over new arrays: each step calls
its Function's ``forward`` with a fresh Context, on the arrays the environment holds, with the
same parameters, in the same order, exactly as ``graph.apply`` would: the same arrays come out,
bit for bit, without the Python that called the ops. What a graph node would hold is kept per
step in a ``ReplayedGraph`` (the Context, the check of saved inputs); the tensors the call
returns get a ``ReplayedNode``, with which ``engine.run_backward`` walks the recorded steps
backward (``ReplayedGraph.backward``): the same order the engine computes for an eager graph,
the same Function backward calls, the gradients added and routed to the sink in the same
order, so the gradients are an eager call's bit for bit.

A ReplayedNode answers what a graph Node answers (``fn``, ``ctx``, ``inputs``, ``freed``,
``watched``, ``release``), so that everything that reads a graph reads a replayed one: the
check of a mean loss, an eager op that takes a replayed result (its backward walks through
the replayed steps node by node, as the engine walks any graph).

One ReplayedGraph per call: nothing of one call is shared with another, so a tensor of an
earlier call keeps its own graph, and loses it to its own backward, as an eager one does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.autodiff.captured_program import EdgeSpec, Program
from minitorch_accum.autodiff.engine import GraphFreedError, LeafSink, reduce_to_shape
from minitorch_accum.autodiff.graph import TensorBase
from minitorch_accum.autodiff.post_order import post_order
from minitorch_accum.autodiff.saved_versions import check, watch
from minitorch_accum.autodiff.tensor import Tensor
from minitorch_accum.backend import backend_of_array
from minitorch_accum.ops.function import Context

__all__ = ["ReplayedGraph", "ReplayedNode", "run_program"]

_FREED = ("backward: this graph was already freed by an earlier backward(); run the forward pass again, or "
          "pass retain_graph=True to the first backward()")

#: any tensor makes tensors through ``wrap``; this one makes the results of replayed steps
_MAKER = Tensor(np.zeros(0, dtype=np.float32))


def run_program(program: Program, members: list[TensorBase], arguments: list[Any]) -> Any:
    """The outputs of one replayed call of ``program`` over the model's ``members`` and the call's
    ``arguments`` (its Tensors and arrays, in ``flatten_arguments`` order)."""
    objects: list[Any] = [*members, *arguments, *program.constant_tensors]
    env: list[Any] = [t.data if isinstance(t, TensorBase) else t for t in objects]
    base = len(env)
    env.extend([None] * len(program.steps))
    graph = ReplayedGraph(program, objects)
    # the Tensor of each result that needs one (returned, viewed by one, checked), and of each array of
    # the model or the arguments that needs one, while the call runs: afterwards only what holds them
    # keeps them (the caller, a check of saved inputs until its backward)
    made: dict[int, Any] = {}

    def tensor(index: int) -> Any:
        held = made.get(index)
        if held is None:
            held = objects[index]
            if not isinstance(held, TensorBase):  # an array: one tensor of it per call, as eager made
                held = made[index] = _MAKER.wrap(held, None, backend_of_array(held))
        return held

    with np.errstate(all="ignore"):  # inf and nan are results, as in every forward
        for position, step in enumerate(program.steps):
            arrays = [env[i] for i in step.inputs]
            ctx = Context(step.backend, step.needs)
            params = step.params
            if step.array_params:
                params = {**params, **{name: env[i] for name, i in step.array_params}}
            if step.scoped:
                with step.backend.device_scope():
                    out = step.fn.forward(ctx, *arrays, **params)
            else:
                out = step.fn.forward(ctx, *arrays, **params)
            if step.cast is not None and out.dtype != step.cast:
                out = out.astype(step.cast)
            env[base + position] = out
            if step.keeps_tensor:
                node = graph.view(position) if step.record else None
                result = _MAKER.wrap(out, node, step.out_backend)
                if step.view_of is not None:
                    viewed = tensor(step.view_of)
                    result._view_of = viewed._view_of or viewed
                made[base + position] = result
            if step.record:
                graph.ctxs[position] = ctx
                if step.watch:
                    graph.watched[position] = [watch(i, tensor(step.inputs[i])) for i in step.watch]
            for index in step.frees:
                env[index] = None
    outputs = _outputs(program.outputs, tensor, base - len(program.constants), base)
    for index in program.unheld:
        objects[index] = None
    return outputs


def _outputs(template: Any, tensor: Any, constants: int, base: int) -> Any:
    """The returned structure, its tensors looked up by index (``constants`` to ``base``: constants)."""
    if template is None:
        return None
    kind, body = template
    if kind == "tensor":
        if constants <= body < base:
            constant = tensor(body)  # a constant returned: a copy, as each eager call made its own
            return constant.wrap(constant.data.copy())
        return tensor(body)
    if kind == "alias":  # another tensor of a returned array (a detach()): not in the graph
        index, viewed = body
        data = tensor(index).data
        out = _MAKER.wrap(data.copy() if constants <= index < base else data, None, backend_of_array(data))
        if viewed is not None:
            source = tensor(viewed)
            out._view_of = source._view_of or source
        return out
    if kind == "dict":
        return {k: _outputs(v, tensor, constants, base) for k, v in body.items()}
    values = [_outputs(v, tensor, constants, base) for v in body]
    return tuple(values) if kind == "tuple" else values


class ReplayedGraph:
    """What the graph nodes of one replayed call would hold, by step: the Context (saved arrays),
    the check of saved inputs, whether backward freed it; and the call's tensors."""

    __slots__ = ("ctxs", "freed", "objects", "program", "views", "watched")

    def __init__(self, program: Program, objects: list[Any]) -> None:
        count = len(program.steps)
        self.program = program
        self.objects = objects  # the model's tensors, the arguments, the constants' tensors
        self.ctxs: list[Context | None] = [None] * count
        self.watched: list[list[tuple[Any, ...]] | None] = [None] * count
        self.freed = [False] * count
        self.views: dict[int, ReplayedNode] = {}

    def view(self, position: int) -> ReplayedNode:
        """The node of step ``position`` (one object per step, as a graph has one Node per op)."""
        node = self.views.get(position)
        if node is None:
            node = self.views[position] = ReplayedNode(self, position)
        return node

    def release(self, position: int) -> None:
        ctx = self.ctxs[position]
        if ctx is not None:
            ctx.release()
        self.ctxs[position] = None
        self.watched[position] = None
        self.freed[position] = True

    # ------------------------------------------------------------------ backward
    def backward(self, root: int, grad: Any, route: LeafSink, retain_graph: bool) -> None:
        """Backpropagate ``grad`` from step ``root``'s result, as ``engine.run_backward`` does for
        an eager graph: every node checked before anything is written, then each step's backward
        in topological order, its saved arrays released as soon as it ran."""
        steps = self.program.steps
        walk = self.program.walks.get(root)
        if walk is None:
            walk = self.program.walks[root] = _walk_of(steps, root)
        order, discovered = walk
        for position in discovered:
            if self.freed[position]:
                raise GraphFreedError(_FREED)
            watched = self.watched[position]
            if watched:
                check(steps[position].fn, watched)
        finishing = self._leaves_finished_by(order) if route.leaf_done is not None else {}
        pending: dict[int, Any] = {root: grad}
        with np.errstate(all="ignore"):  # inf and nan are results (loss scaling relies on seeing them)
            for index, position in enumerate(order):
                out_grad = pending.pop(position, None)
                if out_grad is not None:  # None: nothing flowed here (an output that was not used)
                    self._backward_step(position, out_grad, pending, route)
                del out_grad
                if not retain_graph:
                    self.release(position)
                for leaf in finishing.get(index, ()):
                    if route.accepts(leaf):
                        route.leaf_done(leaf)  # type: ignore[misc]

    def _backward_step(self, position: int, out_grad: Any, pending: dict[int, Any], route: LeafSink) -> None:
        """engine._backward_node for one step (see there): factors to a GEMM-fusing sink, the rest
        through the Function's backward, summed where paths meet or handed to the sink."""
        step = self.program.steps[position]
        edges = step.edges
        ctx = self.ctxs[position]
        assert ctx is not None
        fn = step.fn
        objects = self.objects
        needs = list(step.needs)  # each edge's requires_grad
        if route.fuses_gemm and fn.grad_factors is not None:
            for i, edge in enumerate(edges):
                if needs[i] and edge.leaf is not None and route.accepts(objects[edge.leaf]):
                    factors = fn.grad_factors(ctx, out_grad, i)
                    if factors is not None and (factors[0].shape[0], factors[1].shape[1]) == edge.shape:
                        route.add_product(objects[edge.leaf], factors[0], factors[1])
                        needs[i] = False
        ctx.needs_input_grad = tuple(needs)
        if not any(needs):
            return
        input_grads = fn.backward(ctx, out_grad)
        for edge, needed, g in zip(edges, needs, input_grads, strict=True):
            if not needed or g is None:
                continue
            if g.shape != edge.shape:
                g = reduce_to_shape(edge.backend, g, edge.shape)
            if g.dtype != edge.dtype:
                g = g.astype(edge.dtype)
            if edge.leaf is not None:
                leaf = objects[edge.leaf]
                if route.accepts(leaf):
                    route.add(leaf, g)
            elif edge.node is not None:
                previous = pending.get(edge.node)
                pending[edge.node] = g if previous is None else previous + g

    def _leaves_finished_by(self, order: list[int]) -> dict[int, list[Any]]:
        """engine._leaves_finished_by over the steps: after the step at index i of ``order``, the
        leaves whose gradient of this backward is complete (a tensor that is two leaves once)."""
        last: dict[int, tuple[int, Any]] = {}
        for index, position in enumerate(order):
            for edge in self.program.steps[position].edges:
                if edge.leaf is not None:
                    leaf = self.objects[edge.leaf]
                    last[id(leaf)] = (index, leaf)
        finishing: dict[int, list[Any]] = {}
        for index, leaf in last.values():
            finishing.setdefault(index, []).append(leaf)
        return finishing


def _walk_of(steps: list[Any], root: int) -> tuple[list[int], list[int]]:
    """engine._topological_order over the steps: the order backward walks them from ``root`` (each
    after every step that uses its result) and the order the walk first reaches them, in which
    the engine checks them."""
    discovered: list[int] = []
    order = post_order(root, lambda position: [edge.node for edge in steps[position].edges if edge.node is not None],
                       key=int, reached=discovered.append)
    order.reverse()
    return order, discovered


class ReplayedEdge:
    """graph.Edge for an input of a replayed step (its node a ReplayedNode, its leaf the tensor)."""

    __slots__ = ("backend", "dtype", "leaf", "node", "requires_grad", "shape")

    def __init__(self, graph: ReplayedGraph, spec: EdgeSpec) -> None:
        self.node = None if spec.node is None else graph.view(spec.node)
        self.leaf = None if spec.leaf is None else graph.objects[spec.leaf]
        self.requires_grad = spec.requires_grad
        self.shape = spec.shape
        self.dtype = spec.dtype
        self.backend = spec.backend


class ReplayedNode:
    """The node of a replayed step: what a graph.Node answers, read from its ReplayedGraph; a
    backward that starts at it walks the recorded steps (``run_backward``)."""

    __slots__ = ("_inputs", "graph", "position")

    def __init__(self, graph: ReplayedGraph, position: int) -> None:
        self.graph = graph
        self.position = position
        self._inputs: tuple[ReplayedEdge, ...] | None = None

    @property
    def fn(self) -> Any:
        return self.graph.program.steps[self.position].fn

    @property
    def ctx(self) -> Context | None:
        return self.graph.ctxs[self.position]

    @property
    def freed(self) -> bool:
        return self.graph.freed[self.position]

    @property
    def watched(self) -> list[tuple[Any, ...]] | None:
        return self.graph.watched[self.position]

    @property
    def inputs(self) -> tuple[ReplayedEdge, ...]:
        if self.freed:
            return ()
        if self._inputs is None:
            self._inputs = tuple([ReplayedEdge(self.graph, e) for e in self.graph.program.steps[self.position].edges])
        return self._inputs

    def check_saved(self) -> None:
        watched = self.watched
        if watched:
            check(self.fn, watched)

    def release(self) -> None:
        self.graph.release(self.position)
        self._inputs = None

    def run_backward(self, grad: Any, route: LeafSink, retain_graph: bool) -> None:
        """engine.run_backward from this node's result."""
        self.graph.backward(self.position, grad, route, retain_graph)


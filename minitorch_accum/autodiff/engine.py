"""Reverse-mode differentiation: an iterative topological walk over the graph.

Each op result remembers a ``Node`` (the Function, its Context and its inputs; see graph.py).
``run_backward`` orders the nodes with an explicit stack (no recursion limit, so a
10,000-op chain works), walks them in reverse, and routes every gradient either to
the next node or, for a leaf, to a *sink*. This is the one place where gradients
that meet at a tensor are added up.

The default sink collects a ``Gradients`` container (Burn's style). The
accumulation layer passes its own sink that writes each leaf gradient straight into
a persistent buffer, and may take a matmul's weight gradient as the two factors of
a GEMM so that the GEMM writes (beta = 1) into the buffer itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from minitorch_accum.autodiff.gradients import Gradients
from minitorch_accum.autodiff.graph import Node, TensorBase
from minitorch_accum.autodiff.post_order import post_order

__all__ = ["GraphFreedError", "LeafSink", "reduce_to_shape", "run_backward"]


class GraphFreedError(RuntimeError):
    """backward() reached a part of the graph that an earlier backward() already freed."""


class LeafSink(Protocol):
    """Where leaf gradients go during backward, instead of a Gradients container."""

    #: whether a matmul's weight gradient may come as the two factors of a GEMM (``add_product``)
    #: instead of as an array (``add``); see ``Function.grad_factors``
    fuses_gemm: bool

    #: None, or called once per accepted leaf when backward has no more contributions for it
    #: (a tied weight's last one included): data parallelism starts reducing a bucket as soon
    #: as all of its leaves are done. The engine works out when only if it is set; a sink that
    #: does not need to know says None (the default of a class that derives from LeafSink).
    leaf_done: Callable[[TensorBase], None] | None = None

    def accepts(self, leaf: TensorBase) -> bool:
        """Whether this sink takes the gradients of ``leaf``."""

    def add(self, leaf: TensorBase, grad: Any) -> None:
        """One contribution to the gradient of ``leaf`` (already in ``leaf``'s shape)."""

    def add_product(self, leaf: TensorBase, a: Any, b: Any) -> None:
        """One contribution equal to ``a @ b`` (2-D), for the sink to compute where it likes."""


def reduce_to_shape(backend: Any, grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum a gradient computed in a broadcast shape back to the input's own shape."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0 and grad.shape[extra:] == shape and grad.flags.c_contiguous:
        # only leading axes broadcast (a bias over a product's rows): one sum of rows, in row order
        # as NumPy's sum over those axes adds them
        columns = math.prod(shape)
        return backend.sum_rows(grad.reshape(-1, columns)).reshape(shape)
    xp = backend.xp
    axes = tuple(range(extra)) + tuple(
        extra + i for i, size in enumerate(shape) if size == 1 and grad.shape[extra + i] != 1
    )
    reduced = xp.sum(grad, axis=axes, keepdims=True) if axes else grad
    return reduced.reshape(shape)


_FREED = ("backward: this graph was already freed by an earlier backward(); run the forward pass again, or "
          "pass retain_graph=True to the first backward()")


def _check_reached(node: Node) -> None:
    if node.freed:
        raise GraphFreedError(_FREED)
    if node.watched is not None:  # before any gradient is written: an in-place change is refused whole
        node.check_saved()


def _topological_order(root: Node) -> list[Node]:
    """Nodes that need gradients, each after every node that uses its output."""
    order = post_order(root, lambda node: [edge.node for edge in node.inputs if edge.node is not None],
                       reached=_check_reached)
    order.reverse()
    return order


def _memory_owner(array: Any) -> Any:
    """The array that owns the memory ``array`` views."""
    while getattr(array, "base", None) is not None:
        array = array.base
    return array


class _CollectGradients:
    """The default sink: sums contributions per leaf into a Gradients container."""

    fuses_gemm = False
    leaf_done = None

    def __init__(self) -> None:
        self.entries: dict[int, tuple[TensorBase, Any]] = {}
        self._handed_out: set[int] = set()
        self._owners: list[Any] = []  # keeps owners alive so their ids stay unique

    def accepts(self, leaf: TensorBase) -> bool:
        return True

    def add(self, leaf: TensorBase, grad: Any) -> None:
        entry = self.entries.get(id(leaf))
        if entry is None:
            # an op may return one array, or views of one array, for two inputs (a + b):
            # each leaf must own its gradient, or an in-place update of one (clipping)
            # would change another; broadcast views are read-only, so they are copied too
            owner = _memory_owner(grad)
            if (id(owner) in self._handed_out or not grad.flags.c_contiguous
                    or not getattr(grad.flags, "writeable", True)):
                grad = grad.copy()
                owner = grad
            self._handed_out.add(id(owner))
            self._owners.append(owner)
            self.entries[id(leaf)] = (leaf, grad)
        else:
            self.entries[id(leaf)] = (leaf, entry[1] + grad)

    def add_product(self, leaf: TensorBase, a: Any, b: Any) -> None:
        self.add(leaf, a @ b)


def run_backward(
    root: TensorBase,
    grad: Any = None,
    sink: LeafSink | None = None,
    retain_graph: bool = False,
) -> Gradients | None:
    """Backpropagate from ``root``. Returns the Gradients of every leaf that requires grad,
    or None when a sink took the leaf gradients."""
    if not root.requires_grad:
        raise RuntimeError(
            "backward: this tensor does not require grad (no parameter or requires_grad=True "
            "tensor took part in computing it, or it was computed under no_grad())"
        )
    xp = root.backend.xp
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"backward: the output has shape {root.shape}; reduce it to a scalar first "
                "(e.g. .sum() or .mean()), or pass grad= of that shape"
            )
        grad = xp.ones(root.data.shape, dtype=root.dtype)
    else:
        grad = getattr(grad, "data", grad)
        if tuple(grad.shape) != root.shape:
            raise ValueError(f"backward: grad has shape {tuple(grad.shape)}, output has shape {root.shape}")
        grad = xp.asarray(grad, dtype=root.dtype)

    collector = _CollectGradients() if sink is None else None
    route = sink if sink is not None else collector

    if root.grad_fn is None:  # a leaf asked for its own gradient
        if route.accepts(root):
            route.add(root, grad)
        return None if sink is not None else Gradients(collector.entries)

    node = root.grad_fn
    if type(node) is not Node:  # a replayed call's output (replayed_graph.py): its recorded walk
        node.run_backward(grad, route, retain_graph)
        return None if sink is not None else Gradients(collector.entries)
    pending: dict[int, Any] = {id(node): grad}
    with np.errstate(all="ignore"):  # inf and nan are results (loss scaling relies on seeing them)
        order = _topological_order(node)
        leaf_done = route.leaf_done is not None
        _walk(order, _leaves_finished_by(order) if leaf_done else {}, pending, route, retain_graph)
    return None if sink is not None else Gradients(collector.entries)


def _walk(order: list[Node], finishing: dict[int, list[TensorBase]], pending: dict[int, Any], route: LeafSink,
          retain_graph: bool) -> None:
    """Process nodes in order, each releasing its saved activations as soon as it is done;
    after the node at index i, the leaves ``finishing[i]`` are complete."""
    for index, node in enumerate(order):
        out_grad = pending.pop(id(node), None)
        if out_grad is not None:  # None: nothing flowed here (an output that was not used)
            _backward_node(node, out_grad, pending, route)
        del out_grad
        if not retain_graph:
            node.release()
        for leaf in finishing.get(index, ()):
            if route.accepts(leaf):
                route.leaf_done(leaf)


def _leaves_finished_by(order: list[Node]) -> dict[int, list[TensorBase]]:
    """For each position in ``order``, the leaves whose last contribution comes from that node:
    after it, their gradient of this backward is complete (a tied weight's too)."""
    last: dict[int, tuple[int, TensorBase]] = {}
    for index, node in enumerate(order):
        for edge in node.inputs:
            if edge.leaf is not None:
                last[id(edge.leaf)] = (index, edge.leaf)
    finishing: dict[int, list[TensorBase]] = {}
    for index, leaf in last.values():
        finishing.setdefault(index, []).append(leaf)
    return finishing


def _backward_node(node: Node, out_grad: Any, pending: dict[int, Any], route: LeafSink) -> None:
    """One node's backward: input gradients go onward (summed where paths meet) or to the sink.

    A function of its own so that every temporary (factors, input gradients) dies on return,
    not at the next node."""
    edges = node.inputs
    ctx = node.ctx
    needs = [edge.requires_grad for edge in edges]
    if route.fuses_gemm and node.fn.grad_factors is not None:
        for i, edge in enumerate(edges):
            if needs[i] and edge.leaf is not None and route.accepts(edge.leaf):
                factors = node.fn.grad_factors(ctx, out_grad, i)
                if factors is not None and (factors[0].shape[0], factors[1].shape[1]) == edge.shape:
                    route.add_product(edge.leaf, factors[0], factors[1])
                    needs[i] = False
    ctx.needs_input_grad = tuple(needs)
    if not any(needs):
        return
    input_grads = node.fn.backward(ctx, out_grad)
    for edge, needed, g in zip(edges, needs, input_grads, strict=True):
        if not needed or g is None:
            continue
        g = reduce_to_shape(edge.backend, g, edge.shape)
        if g.dtype != edge.dtype:
            g = g.astype(edge.dtype)
        if edge.leaf is not None:
            if route.accepts(edge.leaf):
                route.add(edge.leaf, g)
        elif edge.node is not None:
            key = id(edge.node)
            previous = pending.get(key)
            pending[key] = g if previous is None else previous + g

"""Reverse-mode differentiation: an iterative topological walk over the graph.

Each op result remembers a ``Node`` (the Function, its Context and its inputs).
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

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from minitorch_accum.autodiff.gradients import Gradients
from minitorch_accum.ops.function import Context, Function

if TYPE_CHECKING:
    from minitorch_accum.autodiff.tensor import Tensor

__all__ = ["GraphFreedError", "LeafSink", "Node", "reduce_to_shape", "run_backward"]


class GraphFreedError(RuntimeError):
    """backward() reached a part of the graph that an earlier backward() already freed."""


class Node:
    """How a tensor was made: the op, what it saved, and its input tensors."""

    __slots__ = ("ctx", "fn", "freed", "inputs")

    def __init__(self, fn: type[Function], ctx: Context, inputs: tuple[Tensor, ...]) -> None:
        self.fn = fn
        self.ctx = ctx
        self.inputs = inputs
        self.freed = False

    def release(self) -> None:
        """Free saved activations and the references to inputs once backward is done with them."""
        self.ctx.release()
        self.inputs = ()
        self.freed = True


class LeafSink(Protocol):
    """Where leaf gradients go during backward, instead of a Gradients container."""

    fuses_gemm: bool

    def accepts(self, leaf: Tensor) -> bool:
        """Whether this sink takes the gradients of ``leaf``."""

    def add(self, leaf: Tensor, grad: Any) -> None:
        """One contribution to the gradient of ``leaf`` (already in ``leaf``'s shape)."""

    def add_product(self, leaf: Tensor, a: Any, b: Any) -> None:
        """One contribution equal to ``a @ b`` (2-D), for the sink to compute where it likes."""


def reduce_to_shape(xp: Any, grad: Any, shape: tuple[int, ...]) -> Any:
    """Sum a gradient computed in a broadcast shape back to the input's own shape."""
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, size in enumerate(shape) if size == 1 and grad.shape[extra + i] != 1
    )
    reduced = xp.sum(grad, axis=axes, keepdims=True) if axes else grad
    return reduced.reshape(shape)


def _topological_order(root: Tensor) -> list[Tensor]:
    """Non-leaf tensors that need gradients, each after every tensor that uses it."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        tensor, inputs_done = stack.pop()
        node = tensor._node
        if inputs_done:
            order.append(tensor)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.freed:
            raise GraphFreedError(
                "backward: this graph was already freed by an earlier backward(); run the forward "
                "pass again, or pass retain_graph=True to the first backward()"
            )
        stack.append((tensor, True))
        for inp in reversed(node.inputs):
            if inp.requires_grad and inp._node is not None and id(inp._node) not in seen:
                stack.append((inp, False))
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

    def __init__(self) -> None:
        self.entries: dict[int, tuple[Tensor, Any]] = {}
        self._handed_out: set[int] = set()
        self._owners: list[Any] = []  # keeps owners alive so their ids stay unique

    def accepts(self, leaf: Tensor) -> bool:
        return True

    def add(self, leaf: Tensor, grad: Any) -> None:
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

    def add_product(self, leaf: Tensor, a: Any, b: Any) -> None:
        self.add(leaf, a @ b)


def run_backward(
    root: Tensor,
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
    xp = root._backend.xp
    if grad is None:
        if root.size != 1:
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

    if root._node is None:  # a leaf asked for its own gradient
        if route.accepts(root):
            route.add(root, grad)
        return None if sink is not None else Gradients(collector.entries)

    pending: dict[int, Any] = {id(root._node): grad}
    with np.errstate(all="ignore"):  # inf and nan are results (loss scaling relies on seeing them)
        _walk(_topological_order(root), pending, route, retain_graph)
    return None if sink is not None else Gradients(collector.entries)


def _walk(order: list[Tensor], pending: dict[int, Any], route: Any, retain_graph: bool) -> None:
    """Process nodes in order: call each backward, route input gradients onward or to the sink."""
    for tensor in order:
        node = tensor._node
        out_grad = pending.pop(id(node), None)
        if out_grad is None:  # nothing flowed here (e.g. an output that was not used)
            if not retain_graph:
                node.release()
            continue
        inputs = node.inputs
        ctx = node.ctx
        needs = [inp.requires_grad for inp in inputs]
        if route.fuses_gemm and hasattr(node.fn, "grad_factors"):
            for i, inp in enumerate(inputs):
                if needs[i] and inp._node is None and route.accepts(inp):
                    factors = node.fn.grad_factors(ctx, out_grad, i)
                    if factors is not None and (factors[0].shape[0], factors[1].shape[1]) == inp.shape:
                        route.add_product(inp, factors[0], factors[1])
                        needs[i] = False
        ctx.needs_input_grad = tuple(needs)
        if any(needs):
            input_grads = node.fn.backward(ctx, out_grad)
            for inp, needed, g in zip(inputs, needs, input_grads, strict=True):
                if not needed or g is None:
                    continue
                g = reduce_to_shape(inp._backend.xp, g, inp.shape)
                if g.dtype != inp.dtype:
                    g = g.astype(inp.dtype)
                if inp._node is None:
                    if route.accepts(inp):
                        route.add(inp, g)
                else:
                    key = id(inp._node)
                    previous = pending.get(key)
                    pending[key] = g if previous is None else previous + g
        if not retain_graph:
            node.release()

"""The graph that tensors build: what the graph knows of a tensor, the node that made it, and ``apply``.

``apply`` runs a Function's forward on its inputs' arrays and, when a gradient will flow
(grad mode on and an input that requires grad), gives the result a ``Node``: the Function,
the Context it saved into, and an ``Edge`` per input. The engine walks those nodes backward.

``TensorBase`` is the part of a tensor that the graph and the engine read (its array, its
backend, whether it requires grad, its node); ``Tensor`` builds on it. It lives here, below
the Tensor class and its rooms, so that they can all make and recognize tensors without
importing the module that assembles Tensor: ``wrap`` is how each makes one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.grad_mode import float_errors_silenced, is_grad_enabled
from minitorch_accum.autodiff.saved_versions import check, watch
from minitorch_accum.backend import Backend, backend_of_array, is_float_dtype
from minitorch_accum.ops.function import Context, Function

__all__ = ["CAPTURING", "Edge", "Node", "TensorBase", "apply", "cast_dtype", "forward_arrays", "transfer"]

#: The capture open in this context (``autodiff/captured_program.py``: the first calls of a ``Replay``), or
#: None. While one is open, every op tells it what it ran (``op(fn, inputs, params, result)``), after
#: running exactly as without it.
CAPTURING: ContextVar[Any] = ContextVar("minitorch_accum_capturing", default=None)


class TensorBase:
    """A backend array and, when it needs a gradient, the node that made it (Tensor's base)."""

    __slots__ = ("__dict__", "__weakref__", "_backend", "_node", "data", "requires_grad")

    #: ``wrap(data, node=None, backend=None)``, which Tensor defines: a new tensor holding
    #: ``data``, an array of this tensor's backend (or of ``backend``): an op's result that
    #: records ``node`` (and so requires grad) when one is given, a constant otherwise. Every
    #: op result is made through it, so that an op on a parameter gives a plain tensor. (Declared,
    #: not an abstract method: isinstance against an ABC costs every op a few hundred ns.)
    wrap: Callable[..., Any]

    #: in-place writes to ``data`` through the library's API (PyTorch's ``_version``); and the
    #: tensor an op's view result views, whose writes it counts. Class defaults: a tensor pays
    #: for them only once it is written or is a view (see saved_versions.py)
    _version = 0
    _view_of: TensorBase | None = None

    def __init__(self, data: Any, requires_grad: bool = False, *, _node: Node | None = None,
                 _backend: Backend | None = None) -> None:
        self._backend = _backend if _backend is not None else backend_of_array(data)
        self.data = data
        self._node = _node
        if requires_grad and not is_float_dtype(data.dtype):
            raise TypeError(f"only float tensors can require grad; this one is {data.dtype.name}")
        self.requires_grad = requires_grad

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def backend(self) -> Backend:
        """The backend (NumPy or CuPy, and the device) that holds ``data``."""
        return self._backend

    @property
    def grad_fn(self) -> Node | None:
        """The graph node that made this tensor (its op, what it saved, its inputs); None for a
        leaf or a tensor made without recording (PyTorch's name)."""
        return self._node

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def view_of(self) -> TensorBase | None:
        """The tensor whose array an op's view result (``w.mT``, a reshape) or a ``detach()`` views,
        or None: its writes are theirs (``version``)."""
        return self._view_of

    @property
    def version(self) -> int:
        """How many in-place writes ``data`` has had through the library (a view's: its base's)."""
        return (self._view_of or self)._version

    def bump_version(self) -> None:
        """Count an in-place write to ``data``. Every write through the library's API calls it, so
        that a backward whose forward saved the array before the write refuses to run."""
        source = self._view_of or self
        source._version += 1


class Edge:
    """What backward needs to know about one input of a node, without holding its data.

    A node keeps the *node* that produced each input (or the leaf tensor itself),
    never intermediate tensors: an intermediate result nobody saved for backward is
    freed as soon as the user drops it, which is what keeps activation memory to
    what backward really needs.
    """

    __slots__ = ("backend", "dtype", "leaf", "node", "requires_grad", "shape")

    def __init__(self, tensor: TensorBase) -> None:
        # the slots themselves, not the properties: an Edge is made for every input of every op
        requires = tensor.requires_grad
        node = tensor._node
        data = tensor.data
        self.node: Node | None = node if requires else None
        self.leaf: TensorBase | None = tensor if requires and node is None else None
        self.requires_grad = requires
        self.shape = tuple(data.shape)
        self.dtype = data.dtype
        self.backend = tensor._backend


class Node:
    """How a tensor was made: the op, what it saved, and an edge per input.

    (A tensor that a replayed call returned has a node of its own kind instead,
    ``replayed_graph.ReplayedNode``, which answers the same attributes.)"""

    __slots__ = ("ctx", "fn", "freed", "inputs", "watched")

    def __init__(self, fn: type[Function], ctx: Context, inputs: tuple[TensorBase, ...]) -> None:
        self.fn = fn
        self.ctx = ctx
        self.inputs = tuple([Edge(t) for t in inputs])
        self.freed = False
        self.watch_saved(inputs)

    def watch_saved(self, inputs: tuple[TensorBase, ...]) -> None:
        """Note, for the check of saved inputs, each input whose array the forward saved."""
        #: saved_versions.watch's entry for each input whose array the forward saved; None when none
        self.watched: list[tuple[Any, ...]] | None = None
        saved = self.ctx.saved
        if saved:
            for index, tensor in enumerate(inputs):
                data = tensor.data
                for array in saved:  # by identity: ops save their input arrays themselves
                    if array is data:
                        if self.watched is None:
                            self.watched = [watch(index, tensor)]
                        else:
                            self.watched.append(watch(index, tensor))
                        break

    def check_saved(self) -> None:
        """InPlaceModificationError when an input the forward saved was written in place since
        (see saved_versions.py: what the version and the checksum catch)."""
        if self.watched:
            check(self.fn, self.watched)

    def release(self) -> None:
        """Free saved activations and the references to inputs once backward is done with them."""
        self.ctx.release()
        self.inputs = ()
        self.watched = None
        self.freed = True


def forward_arrays(fn: type[Function], ctx: Context, inputs: tuple[TensorBase, ...], params: dict[str, Any]) -> Any:
    """``fn.forward`` on the inputs' arrays, floating-point warnings silenced (inf and nan are
    results), on the inputs' device, in the first input's dtype."""
    first = inputs[0]
    backend = first._backend
    arrays = [t.data for t in inputs]
    if backend.has_device_scope or not float_errors_silenced():
        with backend.device_scope(), np.errstate(all="ignore"):
            out = fn.forward(ctx, *arrays, **params)
    else:  # inside a Module's call or a replayed forward: its errstate is in force
        out = fn.forward(ctx, *arrays, **params)
    dtype = cast_dtype(fn, first.data.dtype)
    if dtype is not None and out.dtype != dtype:
        out = out.astype(dtype)  # some 16-bit NumPy loops (ml_dtypes matmul) return float32
    return out


def cast_dtype(fn: type[Function], dtype: np.dtype) -> np.dtype | None:
    """The dtype an op's result is cast to when its forward returned another (its first input's,
    a float one), or None where none is imposed (a Cast, integer results)."""
    return dtype if fn is not ops.Cast and is_float_dtype(dtype) else None


def apply(fn: type[Function], *inputs: TensorBase, **params: Any) -> Any:
    """Run an op's forward on the inputs' arrays and record a graph node if needed."""
    needs = tuple([t.requires_grad for t in inputs])
    record = True in needs and is_grad_enabled()
    ctx = Context(inputs[0]._backend, needs)
    out = forward_arrays(fn, ctx, inputs, params)
    result = _viewing(inputs[0].wrap(out, Node(fn, ctx, inputs) if record else None), inputs)
    capture = CAPTURING.get()
    if capture is not None:
        capture.op(fn, inputs, params, result)
    return result


def _viewing(result: Any, inputs: tuple[TensorBase, ...]) -> Any:
    """``result``, counting the writes of the input it views when an op returned a view."""
    owner = getattr(result.data, "base", None)
    if owner is not None:  # a view (w.mT, a reshape): it counts the writes of the tensor it views
        for t in inputs:
            if t.data is owner or t.data.base is owner:
                result._view_of = t._view_of or t
                break
    return result


def transfer(x: TensorBase, target: Backend) -> Any:
    """``x`` copied to ``target``'s device; the gradient flows back to ``x``'s."""
    ctx = Context(x.backend, (x.requires_grad,))
    out = ops.Transfer.forward(ctx, x.data, target=target)
    record = is_grad_enabled() and x.requires_grad
    result = x.wrap(out, Node(ops.Transfer, ctx, (x,)) if record else None, backend=target)
    capture = CAPTURING.get()
    if capture is not None:
        capture.op(ops.Transfer, (x,), {"target": target}, result)
    return result

"""The Tensor: a backend array plus, when it needs a gradient, the node that made it.

Tensor is assembled from rooms: ``TensorBase`` (graph.py: the array, its backend, its node),
``MovementMixin`` (movement.py: reshape, permute, indexing, ...), ``ReductionMixin``
(reductions.py: sum, mean, max, softmax, topk, ...) and ``ConversionMixin`` (conversion.py:
``to`` another device or dtype, ``float()``/``double()``/``half()``, ``clone``). This file holds
the rest: its facts and host conversions, backward, the operators and the elementwise math.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.conversion import ConversionMixin
from minitorch_accum.autodiff.engine import run_backward
from minitorch_accum.autodiff.gradients import Gradients
from minitorch_accum.autodiff.graph import Node, TensorBase, apply
from minitorch_accum.autodiff.movement import MovementMixin
from minitorch_accum.autodiff.operands import as_operand, binary, check_logical, compare, logical
from minitorch_accum.autodiff.reductions import ReductionMixin
from minitorch_accum.backend import Backend, is_float_dtype
from minitorch_accum.backend.device import Device
from minitorch_accum.ops.elementwise import GELU_APPROXIMATIONS
from minitorch_accum.ops.function import Function, OpError
from minitorch_accum.ops.matmul import matmul_shape

__all__ = ["ElementCount", "Tensor", "matmul"]

_NO_GRAD_ATTRIBUTE = (
    "gradients are not stored on tensors here (Burn's design): take them from the container that "
    "backward returns, grads = loss.backward(); grads[t] (or acc.grads()[t] from an Accumulator)"
)


_new_tensor = object.__new__


class ElementCount(int):
    """``x.size``: the number of elements, an int as in Burn and NumPy.

    Calling it, PyTorch's ``x.size()``, is an error that says what to write instead."""

    def __call__(self, dim: int | None = None) -> Any:
        raise TypeError(
            f"Tensor.size is the number of elements ({int(self)}), an int as in Burn and NumPy, not a "
            "method: use x.shape for PyTorch's x.size() and x.shape[d] for x.size(d)"
        )


def _binary_operator(fn: type[Function], op: str, name: str | None = None) -> tuple[Callable[..., Any], ...]:
    """``__<name>__`` and its reflected twin ``__r<name>__`` (``2 * x`` is ``x.__rmul__(2)``)."""

    def operator(self: Tensor, other: Any) -> Tensor:
        return binary(fn, op, self, other)

    def reflected(self: Tensor, other: Any) -> Tensor:
        return binary(fn, op, other, self)

    for method, dunder in ((operator, f"__{name or op}__"), (reflected, f"__r{name or op}__")):
        method.__name__, method.__qualname__ = dunder, f"Tensor.{dunder}"
    return operator, reflected


class Tensor(TensorBase, MovementMixin, ReductionMixin, ConversionMixin):
    """An n-dimensional array on a device, with reverse-mode differentiation.

    ``data`` is the backend array (``numpy.ndarray`` on the CPU, ``cupy.ndarray`` on
    a GPU). A tensor made by an op from inputs that require grad remembers how it
    was made, so ``backward()`` can return the gradients of the leaves.

    Axes are named ``axis``/``keepdims`` (NumPy, Burn) or ``dim``/``keepdim`` (PyTorch)
    everywhere an axis is taken. ``==`` compares identity (tensors are dict keys, as
    in a Gradients container); ``x.eq(y)`` compares values.
    """

    __slots__ = ()

    # NumPy must defer to Tensor's reflected operators (ndarray * Tensor -> Tensor.__rmul__)
    __array_priority__ = 100

    def wrap(self, data: Any, node: Node | None = None, backend: Backend | None = None) -> Tensor:
        """A Tensor holding ``data``, recording ``node`` (see ``TensorBase.wrap``)."""
        # every op result is made here: the slots are set directly (a keyword call of __init__
        # costs as much again), with __init__'s one check
        if node is not None and not is_float_dtype(data.dtype):
            raise TypeError(f"only float tensors can require grad; this one is {data.dtype.name}")
        out = _new_tensor(Tensor)
        out._backend = self._backend if backend is None else backend
        out.data = data
        out._node = node
        out.requires_grad = node is not None
        return out

    # ------------------------------------------------------------------ facts
    @property
    def device(self) -> Device:
        return self.backend.device

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> ElementCount:
        """The number of elements (Burn's and NumPy's ``size``); ``x.size()`` says to use ``x.shape``."""
        return ElementCount(self.data.size)

    def numel(self) -> int:
        """The number of elements (PyTorch's name for ``size``)."""
        return int(self.data.size)

    def dim(self) -> int:
        """The number of axes (PyTorch's name for ``ndim``)."""
        return self.data.ndim

    @property
    def grad(self) -> Any:
        """Always an error: gradients live in the container ``backward()`` returns."""
        raise AttributeError(_NO_GRAD_ATTRIBUTE)

    @grad.setter
    def grad(self, value: Any) -> None:
        raise AttributeError(_NO_GRAD_ATTRIBUTE)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def numpy(self) -> np.ndarray:
        """A NumPy copy of the data (copied to the host from a GPU)."""
        return np.array(self.backend.to_host(self.data), copy=True)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.backend.to_host(self.data)
        return np.asarray(host, dtype=dtype)

    def item(self) -> float:
        """The value of a one-element tensor as a Python number."""
        if self.size != 1:
            raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __repr__(self) -> str:
        grad = ", requires_grad=True" if self.requires_grad else ""
        body = np.array2string(np.asarray(self.backend.to_host(self.data), dtype=np.float64)
                               if is_float_dtype(self.dtype) else self.numpy(), precision=4,
                               separator=", ", threshold=20)
        return f"tensor({body}, dtype={self.dtype.name}, device={self.device}{grad})"

    # -------------------------------------------------------------- autodiff
    def backward(self, grad: Any = None, retain_graph: bool = False) -> Gradients:
        """Gradients of this (scalar) tensor with respect to every leaf that requires grad.

        The graph and its saved activations are freed afterwards unless
        ``retain_graph=True``; a second backward over a freed graph is an error.
        """
        result = run_backward(self, grad, retain_graph=retain_graph)
        assert result is not None
        return result

    def detach(self) -> Tensor:
        """The same data, cut from the graph (no gradient flows through it). It counts the writes
        of this tensor's array (its version), as PyTorch's detach shares the version counter."""
        out = self.wrap(self.data)
        out._view_of = self._view_of or self
        return out

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Mark a leaf as needing a gradient (in place); returns self."""
        if not self.is_leaf:
            raise RuntimeError("requires_grad_ can only change leaf tensors")
        if requires_grad and not is_float_dtype(self.dtype):
            raise TypeError(f"only float tensors can require grad; this one is {self.dtype.name}")
        self.requires_grad = requires_grad
        return self

    # ------------------------------------------------------------ arithmetic
    __add__, __radd__ = _binary_operator(ops.Add, "add")
    __sub__, __rsub__ = _binary_operator(ops.Sub, "sub")
    __mul__, __rmul__ = _binary_operator(ops.Mul, "mul")
    __truediv__, __rtruediv__ = _binary_operator(ops.Div, "div", "truediv")

    def __pow__(self, exponent: Any) -> Tensor:
        if isinstance(exponent, int | float) and not isinstance(exponent, bool):
            return apply(ops.PowScalar, self, exponent=float(exponent))
        return binary(ops.Pow, "pow", self, exponent)

    def __rpow__(self, base: Any) -> Tensor:
        return binary(ops.Pow, "pow", base, self)

    def __neg__(self) -> Tensor:
        return apply(ops.Neg, self)

    def __abs__(self) -> Tensor:
        return self.abs()

    def __matmul__(self, other: Any) -> Tensor:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return matmul(as_operand(other, self, "matmul"), self)

    # comparisons give bool tensors that carry no gradient; == keeps Python identity semantics
    def __lt__(self, other: Any) -> Tensor:
        return compare(self, other, "less")

    def __le__(self, other: Any) -> Tensor:
        return compare(self, other, "less_equal")

    def __gt__(self, other: Any) -> Tensor:
        return compare(self, other, "greater")

    def __ge__(self, other: Any) -> Tensor:
        return compare(self, other, "greater_equal")

    def eq(self, other: Any) -> Tensor:
        """Elementwise equality as a bool tensor (``==`` compares identity, as for dict keys)."""
        return compare(self, other, "equal")

    def ne(self, other: Any) -> Tensor:
        """Elementwise inequality as a bool tensor (``!=`` compares identity)."""
        return compare(self, other, "not_equal")

    __hash__ = object.__hash__

    # logic on bool (and integer) tensors: masks combine with &, |, ^ and ~
    def __and__(self, other: Any) -> Tensor:
        return logical(self, other, "bitwise_and", "&")

    def __or__(self, other: Any) -> Tensor:
        return logical(self, other, "bitwise_or", "|")

    def __xor__(self, other: Any) -> Tensor:
        return logical(self, other, "bitwise_xor", "^")

    # the three are symmetric, so True & mask is mask & True
    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self) -> Tensor:
        check_logical(self, "~")
        return self.wrap(self.backend.xp.invert(self.data))

    # ------------------------------------------------------------ unary math
    def exp(self) -> Tensor:
        return apply(ops.Exp, self)

    def log(self) -> Tensor:
        return apply(ops.Log, self)

    def sqrt(self) -> Tensor:
        return apply(ops.Sqrt, self)

    def rsqrt(self) -> Tensor:
        """1 / sqrt(x)."""
        return apply(ops.Rsqrt, self)

    def square(self) -> Tensor:
        return apply(ops.PowScalar, self, exponent=2.0)

    def abs(self) -> Tensor:
        """|x| (gradient 0 at 0, as PyTorch)."""
        return apply(ops.Abs, self)

    def clamp(self, min: float | None = None, max: float | None = None) -> Tensor:
        """x limited to [min, max] (PyTorch's clamp; either bound may be None). The gradient
        passes where min <= x <= max, bounds included, as in PyTorch."""
        if min is None and max is None:
            raise OpError("clamp: give min, max or both")
        for name, bound in (("min", min), ("max", max)):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int | float | np.number)):
                raise TypeError(f"clamp: {name} must be a number, got {type(bound).__name__}; "
                                "for tensor bounds use mta.maximum and mta.minimum")
        return apply(ops.Clamp, self, low=min, high=max)

    def tanh(self) -> Tensor:
        return apply(ops.Tanh, self)

    def sigmoid(self) -> Tensor:
        return apply(ops.Sigmoid, self)

    def relu(self) -> Tensor:
        return apply(ops.Relu, self)

    def gelu(self, approximate: str = "none") -> Tensor:
        """GELU: the exact erf form by default, ``approximate="tanh"`` for GPT-2's (as PyTorch)."""
        if approximate not in GELU_APPROXIMATIONS:
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return apply(ops.Gelu, self, approximate=approximate)

    def masked_fill(self, mask: Any, value: float) -> Tensor:
        """``value`` where the bool ``mask`` (broadcastable to this shape) is True, this tensor
        elsewhere; the filled places get no gradient. ``value`` is a number (``float("-inf")``
        for attention masks)."""
        mask_data = mask.data if isinstance(mask, TensorBase) else self.backend.asarray(mask)
        if isinstance(mask, bool) or mask_data.dtype != np.bool_:
            hint = " (== compares tensor identity here: compare values with mask.eq(0) or use a bool mask)" \
                if isinstance(mask, bool) else ""
            raise TypeError(f"masked_fill: mask must be a bool tensor, got {type(mask).__name__} of dtype "
                            f"{getattr(mask_data, 'dtype', np.dtype(type(mask))).name}{hint}")
        if isinstance(value, TensorBase):
            if value.requires_grad or value.size != 1:
                raise TypeError("masked_fill: value must be a number (or a one-element tensor without grad); "
                                "for a value that takes a gradient use mta.where(mask, value, x)")
            value = value.item()
        try:
            shape = np.broadcast_shapes(tuple(mask_data.shape), self.shape)
        except ValueError:
            shape = None
        if shape != self.shape:
            raise OpError(f"masked_fill: mask of shape {tuple(mask_data.shape)} does not broadcast to "
                          f"the tensor's shape {self.shape}")
        if not is_float_dtype(self.dtype) and not float(value).is_integer():
            raise TypeError(f"masked_fill: value {value!r} does not fit a {self.dtype.name} tensor")
        return apply(ops.MaskedFill, self, mask=mask_data, value=value)


def matmul(a: Tensor, b: Any) -> Tensor:
    """Matrix product; 1-D operands are treated as a row (left) or column (right) vector."""
    b = as_operand(b, a, "matmul")
    if a.dtype != b.dtype:
        raise TypeError(f"matmul: dtype mismatch: {a.dtype.name} and {b.dtype.name}")
    shape = matmul_shape("matmul", a.shape, b.shape)
    out = apply(ops.MatMul, a.reshape(1, -1) if a.ndim == 1 else a, b.reshape(-1, 1) if b.ndim == 1 else b)
    return out if out.shape == shape else out.reshape(shape)

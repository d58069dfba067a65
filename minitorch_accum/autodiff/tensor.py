"""The Tensor: a backend array plus, when it needs a gradient, the node that made it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff.engine import Node, run_backward
from minitorch_accum.autodiff.grad_mode import is_grad_enabled
from minitorch_accum.autodiff.gradients import Gradients
from minitorch_accum.backend import (
    Backend,
    DeviceLike,
    backend_for,
    backend_of_array,
    int64,
    is_float_dtype,
    parse_device,
    resolve_tensor_dtype,
)
from minitorch_accum.backend.device import Device
from minitorch_accum.ops.axes import axis_argument, keepdims_argument, normalize_axes, normalize_axis
from minitorch_accum.ops.elementwise import GELU_APPROXIMATIONS
from minitorch_accum.ops.function import Context, Function, OpError

__all__ = ["ElementCount", "Tensor", "ValuesIndices", "apply", "matmul"]

_is_float = is_float_dtype

_NO_GRAD_ATTRIBUTE = (
    "gradients are not stored on tensors here (Burn's design): take them from the container that "
    "backward returns, grads = loss.backward(); grads[t] (or acc.grads()[t] from an Accumulator)"
)


class ElementCount(int):
    """``x.size``: the number of elements, an int as in Burn and NumPy.

    Calling it, PyTorch's ``x.size()``, is an error that says what to write instead."""

    def __call__(self, dim: int | None = None) -> Any:
        raise TypeError(
            f"Tensor.size is the number of elements ({int(self)}), an int as in Burn and NumPy, not a "
            "method: use x.shape for PyTorch's x.size() and x.shape[d] for x.size(d)"
        )


class ValuesIndices(NamedTuple):
    """``max(dim=...)`` and ``min(dim=...)``: the values and their int64 indices, as PyTorch returns."""

    values: Tensor
    indices: Tensor


class Tensor:
    """An n-dimensional array on a device, with reverse-mode differentiation.

    ``data`` is the backend array (``numpy.ndarray`` on the CPU, ``cupy.ndarray`` on
    a GPU). A tensor made by an op from inputs that require grad remembers how it
    was made, so ``backward()`` can return the gradients of the leaves.

    Axes are named ``axis``/``keepdims`` (NumPy, Burn) or ``dim``/``keepdim`` (PyTorch)
    everywhere an axis is taken. ``==`` compares identity (tensors are dict keys, as
    in a Gradients container); ``x.eq(y)`` compares values.
    """

    __slots__ = ("__dict__", "__weakref__", "_backend", "_node", "data", "requires_grad")

    # NumPy must defer to Tensor's reflected operators (ndarray * Tensor -> Tensor.__rmul__)
    __array_priority__ = 100

    def __init__(self, data: Any, requires_grad: bool = False, *, _node: Node | None = None,
                 _backend: Backend | None = None) -> None:
        self._backend = _backend if _backend is not None else backend_of_array(data)
        self.data = data
        self._node = _node
        if requires_grad and not _is_float(data.dtype):
            raise TypeError(f"only float tensors can require grad; this one is {data.dtype.name}")
        self.requires_grad = requires_grad

    # ------------------------------------------------------------------ facts
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
    def device(self) -> Device:
        return self._backend.device

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
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self) -> Node | None:
        """The graph node that made this tensor (its op, what it saved, its inputs); None for a
        leaf or a tensor made without recording (PyTorch's name)."""
        return self._node

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
        return np.array(self._backend.to_host(self.data), copy=True)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self._backend.to_host(self.data)
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
        body = np.array2string(np.asarray(self._backend.to_host(self.data), dtype=np.float64)
                               if _is_float(self.dtype) else self.numpy(), precision=4,
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
        """The same data, cut from the graph (no gradient flows through it)."""
        return Tensor(self.data, _backend=self._backend)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Mark a leaf as needing a gradient (in place); returns self."""
        if not self.is_leaf:
            raise RuntimeError("requires_grad_ can only change leaf tensors")
        if requires_grad and not _is_float(self.dtype):
            raise TypeError(f"only float tensors can require grad; this one is {self.dtype.name}")
        self.requires_grad = requires_grad
        return self

    def to(self, device: DeviceLike | None = None, dtype: Any = None) -> Tensor:
        """This tensor on another device and/or with another dtype (differentiable)."""
        out = self
        if dtype is not None:
            target = resolve_tensor_dtype(dtype)
            if target != out.dtype:
                out = apply(ops.Cast, out, dtype=target) if _is_float(target) and _is_float(out.dtype) \
                    else Tensor(out.data.astype(target), _backend=out._backend)
        if device is not None and parse_device(device) != out.device:
            out = _transfer(out, backend_for(device))
        return out

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, index: int = 0) -> Tensor:
        return self.to(f"cuda:{index}")

    # ------------------------------------------------------------ arithmetic
    def __add__(self, other: Any) -> Tensor:
        return _binary(ops.Add, "add", self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _binary(ops.Add, "add", other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _binary(ops.Sub, "sub", self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _binary(ops.Sub, "sub", other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _binary(ops.Mul, "mul", self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _binary(ops.Mul, "mul", other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _binary(ops.Div, "div", self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _binary(ops.Div, "div", other, self)

    def __pow__(self, exponent: Any) -> Tensor:
        if isinstance(exponent, int | float) and not isinstance(exponent, bool):
            return apply(ops.PowScalar, self, exponent=float(exponent))
        return _binary(ops.Pow, "pow", self, exponent)

    def __rpow__(self, base: Any) -> Tensor:
        return _binary(ops.Pow, "pow", base, self)

    def __neg__(self) -> Tensor:
        return apply(ops.Neg, self)

    def __abs__(self) -> Tensor:
        return self.abs()

    def __matmul__(self, other: Any) -> Tensor:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return matmul(_as_operand(other, self, "matmul"), self)

    # comparisons give bool tensors that carry no gradient; == keeps Python identity semantics
    def __lt__(self, other: Any) -> Tensor:
        return _compare(self, other, "less")

    def __le__(self, other: Any) -> Tensor:
        return _compare(self, other, "less_equal")

    def __gt__(self, other: Any) -> Tensor:
        return _compare(self, other, "greater")

    def __ge__(self, other: Any) -> Tensor:
        return _compare(self, other, "greater_equal")

    def eq(self, other: Any) -> Tensor:
        """Elementwise equality as a bool tensor (``==`` compares identity, as for dict keys)."""
        return _compare(self, other, "equal")

    def ne(self, other: Any) -> Tensor:
        """Elementwise inequality as a bool tensor (``!=`` compares identity)."""
        return _compare(self, other, "not_equal")

    __hash__ = object.__hash__

    # logic on bool (and integer) tensors: masks combine with &, |, ^ and ~
    def __and__(self, other: Any) -> Tensor:
        return _logical(self, other, "bitwise_and", "&")

    def __or__(self, other: Any) -> Tensor:
        return _logical(self, other, "bitwise_or", "|")

    def __xor__(self, other: Any) -> Tensor:
        return _logical(self, other, "bitwise_xor", "^")

    # the three are symmetric, so True & mask is mask & True
    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    def __invert__(self) -> Tensor:
        _check_logical(self, "~")
        return Tensor(self._backend.xp.invert(self.data), _backend=self._backend)

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
        mask_data = mask.data if isinstance(mask, Tensor) else self._backend.asarray(mask)
        if isinstance(mask, bool) or mask_data.dtype != np.bool_:
            hint = " (== compares tensor identity here: compare values with mask.eq(0) or use a bool mask)" \
                if isinstance(mask, bool) else ""
            raise TypeError(f"masked_fill: mask must be a bool tensor, got {type(mask).__name__} of dtype "
                            f"{getattr(mask_data, 'dtype', np.dtype(type(mask))).name}{hint}")
        if isinstance(value, Tensor):
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
        if not _is_float(self.dtype) and not float(value).is_integer():
            raise TypeError(f"masked_fill: value {value!r} does not fit a {self.dtype.name} tensor")
        return apply(ops.MaskedFill, self, mask=mask_data, value=value)

    def tril(self, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two axes (above ``diagonal`` set to 0)."""
        return self.masked_fill(~_triangle(self, "tril", diagonal), 0)

    def triu(self, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two axes (below ``diagonal`` set to 0)."""
        return self.masked_fill(_triangle(self, "triu", diagonal - 1), 0)

    # ------------------------------------------------------------ reductions
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
            dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Tensor:
        return _reduce(ops.Sum, "sum", self, axis, keepdims, dim, keepdim)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
             dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Tensor:
        return _reduce(ops.Mean, "mean", self, axis, keepdims, dim, keepdim)

    def var(self, axis: int | Sequence[int] | None = None, unbiased: bool | None = None,
            keepdims: bool = False, *, correction: float | None = None,
            dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Tensor:
        """Variance over ``axis``: sum((x - mean)^2) / (N - correction), ``correction=1`` (unbiased)
        by default, as PyTorch; ``unbiased=False`` is ``correction=0``."""
        if unbiased is not None and correction is not None:
            raise TypeError("var: give unbiased or correction, not both")
        if correction is None:
            correction = 0 if unbiased is False else 1
        axes = normalize_axes(axis_argument("var", axis, dim), self.ndim, "var", self.shape)
        keep = keepdims_argument("var", keepdims, keepdim)
        count = math.prod(self.shape[a] for a in axes)
        centered = self - self.mean(axes, keepdims=True)
        # N <= correction divides by 0 (inf or nan), as PyTorch does
        return (centered * centered).sum(axes, keepdims=keep) / float(max(count - correction, 0))

    def max(self, axis: Any = None, keepdims: bool = False, *, dim: int | None = None,
            keepdim: bool | None = None) -> Any:
        """The largest values.

        * ``x.max(axis)`` / ``x.max(axis=...)`` (NumPy, Burn): the values over ``axis`` (all axes
          when None); tied maxima share the gradient.
        * ``x.max(dim=d)`` (PyTorch): ``ValuesIndices(values, indices)`` along the one axis ``d``;
          the gradient goes to the index taken (the first maximum), as PyTorch's.
        * ``x.max(other_tensor)``: the elementwise maximum, as ``torch.max(a, b)``.
        """
        return _extreme(self, "max", axis, keepdims, dim, keepdim)

    def min(self, axis: Any = None, keepdims: bool = False, *, dim: int | None = None,
            keepdim: bool | None = None) -> Any:
        """The smallest values; the same three forms as ``max``."""
        return _extreme(self, "min", axis, keepdims, dim, keepdim)

    def argmax(self, axis: int | None = None, keepdims: bool = False, *, dim: int | None = None,
               keepdim: bool | None = None) -> Tensor:
        """int64 indices of the first maximum along ``axis`` (of the flattened tensor when None)."""
        return _arg_extreme(self, "argmax", axis, keepdims, dim, keepdim)

    def argmin(self, axis: int | None = None, keepdims: bool = False, *, dim: int | None = None,
               keepdim: bool | None = None) -> Tensor:
        """int64 indices of the first minimum along ``axis`` (of the flattened tensor when None)."""
        return _arg_extreme(self, "argmin", axis, keepdims, dim, keepdim)

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdims: bool = False, *,
                  dim: int | Sequence[int] | None = None, keepdim: bool | None = None) -> Tensor:
        return _reduce(ops.LogSumExp, "logsumexp", self, axis, keepdims, dim, keepdim)

    def softmax(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """Softmax along ``axis`` (PyTorch: ``dim``), the last axis by default."""
        return _along_axis(ops.Softmax, "softmax", self, axis, dim)

    def log_softmax(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        return _along_axis(ops.LogSoftmax, "log_softmax", self, axis, dim)

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        return apply(ops.Reshape, self, shape=_check_reshape(self.shape, _shape_arguments(shape)))

    def view(self, *shape: int | Sequence[int]) -> Tensor:
        """``reshape`` (PyTorch's name; arrays here need no contiguity for it)."""
        return self.reshape(*shape)

    def contiguous(self) -> Tensor:
        """This tensor: every array here is usable as it is (PyTorch habit, a no-op)."""
        return self

    def flatten(self, start_axis: int | None = None, end_axis: int | None = None, *, start_dim: int | None = None,
                end_dim: int | None = None) -> Tensor:
        """Merge axes ``start_axis..end_axis`` (inclusive, default all; PyTorch: ``start_dim``,
        ``end_dim``) into one."""
        start = axis_argument("flatten", start_axis, start_dim)
        end = axis_argument("flatten", end_axis, end_dim)
        start = 0 if start is None else start
        end = -1 if end is None else end
        rank = max(self.ndim, 1)
        first = normalize_axis(start, rank, "flatten", self.shape)
        last = normalize_axis(end, rank, "flatten", self.shape)
        if first > last:
            raise OpError(f"flatten: start axis {start} comes after end axis {end} for shape {self.shape}")
        return self.reshape(self.shape[:first] + (-1,) + self.shape[last + 1:])

    def unsqueeze(self, axis: int | None = None, *, dim: int | None = None) -> Tensor:
        """A new axis of size 1 at ``axis`` (PyTorch: ``dim``; negative counts from the new end)."""
        chosen = axis_argument("unsqueeze", axis, dim)
        if chosen is None:
            raise TypeError("unsqueeze: needs the position of the new axis (axis= or dim=)")
        at = normalize_axis(chosen, self.ndim + 1, "unsqueeze", self.shape)
        return self.reshape(self.shape[:at] + (1,) + self.shape[at:])

    def squeeze(self, axis: int | Sequence[int] | None = None, *, dim: int | Sequence[int] | None = None) -> Tensor:
        """Drop size-1 axes: all of them, or those of ``axis`` that have size 1 (others stay, as PyTorch)."""
        chosen = axis_argument("squeeze", axis, dim)
        axes = normalize_axes(chosen, self.ndim, "squeeze", self.shape)
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if not (i in axes and n == 1)))

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        order = _shape_arguments(axes)
        if sorted(normalize_axis(a, self.ndim, "permute", self.shape) for a in order) != list(range(self.ndim)):
            raise OpError(f"permute: {tuple(order)} is not a permutation of the axes of shape {self.shape}")
        return apply(ops.Permute, self, axes=tuple(a % self.ndim for a in order))

    def transpose(self, axis0: int | None = None, axis1: int | None = None, *, dim0: int | None = None,
                  dim1: int | None = None) -> Tensor:
        """Swap two axes (the last two by default; PyTorch: ``dim0``, ``dim1``)."""
        if self.ndim < 2:
            raise OpError(f"transpose: needs at least 2 axes, got shape {self.shape}")
        first = axis_argument("transpose", axis0, dim0)
        second = axis_argument("transpose", axis1, dim1)
        order = list(range(self.ndim))
        a = normalize_axis(-2 if first is None else first, self.ndim, "transpose", self.shape)
        b = normalize_axis(-1 if second is None else second, self.ndim, "transpose", self.shape)
        order[a], order[b] = order[b], order[a]
        return apply(ops.Permute, self, axes=tuple(order))

    @property
    def T(self) -> Tensor:
        """All axes reversed (the matrix transpose for 2-D tensors)."""
        return apply(ops.Permute, self, axes=tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:
        """The last two axes swapped (a batch of matrices transposed), as PyTorch's ``mT``."""
        if self.ndim < 2:
            raise OpError(f"mT: needs at least 2 axes, got shape {self.shape}")
        return self.transpose(-2, -1)

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        target = tuple(shape)
        try:
            np.broadcast_shapes(self.shape, target)
        except ValueError:
            raise OpError(f"broadcast_to: cannot broadcast shape {self.shape} to {target}") from None
        if np.broadcast_shapes(self.shape, target) != target:
            raise OpError(f"broadcast_to: cannot broadcast shape {self.shape} to {target}")
        return apply(ops.BroadcastTo, self, shape=target)

    def expand(self, *sizes: int | Sequence[int]) -> Tensor:
        """``broadcast_to`` the PyTorch way: -1 keeps an axis's size; new axes go in front."""
        target = _shape_arguments(sizes)
        extra = len(target) - self.ndim
        if extra < 0 or any(n == -1 for n in target[:extra]):
            raise OpError(f"expand: cannot expand shape {self.shape} to {target}")
        return self.broadcast_to(tuple(self.shape[i - extra] if n == -1 else n for i, n in enumerate(target)))

    def split(self, split_size_or_sections: int | Sequence[int], axis: int | None = None, *,
              dim: int | None = None) -> tuple[Tensor, ...]:
        """Pieces along ``axis`` (PyTorch: ``dim``, default 0): of ``split_size`` each (the last
        may be smaller), or of the sizes listed, which must add up to the axis's length."""
        chosen = axis_argument("split", axis, dim)
        ax = normalize_axis(0 if chosen is None else chosen, self.ndim, "split", self.shape)
        length = self.shape[ax]
        if isinstance(split_size_or_sections, int):
            if split_size_or_sections <= 0:
                raise OpError(f"split: split size must be positive, got {split_size_or_sections}")
            sizes = [min(split_size_or_sections, length - s) for s in range(0, length, split_size_or_sections)]
        else:
            sizes = [int(n) for n in split_size_or_sections]
            if sum(sizes) != length or any(n < 0 for n in sizes):
                raise OpError(f"split: sizes {tuple(sizes)} do not add up to {length}, the length of axis "
                              f"{ax} of shape {self.shape}")
        return _pieces(self, ax, sizes)

    def chunk(self, chunks: int, axis: int | None = None, *, dim: int | None = None) -> tuple[Tensor, ...]:
        """At most ``chunks`` pieces of ceil(length / chunks) along ``axis`` (PyTorch: ``dim``)."""
        if not isinstance(chunks, int) or chunks <= 0:
            raise OpError(f"chunk: chunks must be a positive int, got {chunks!r}")
        chosen = axis_argument("chunk", axis, dim)
        ax = normalize_axis(0 if chosen is None else chosen, self.ndim, "chunk", self.shape)
        return self.split(max(-(-self.shape[ax] // chunks), 1), ax)

    def gather(self, dim: int, index: Tensor) -> Tensor:
        """``out[i][j] = x[index[i][j]][j]`` for dim 0 (PyTorch's gather); ``index`` has this
        tensor's rank and its shape on every other axis."""
        ax = normalize_axis(dim, self.ndim, "gather", self.shape)
        data = index.data if isinstance(index, Tensor) else self._backend.asarray(index)
        if data.dtype.kind not in "iu":
            raise TypeError(f"gather: index must be an integer tensor, got {data.dtype.name}")
        if data.ndim != self.ndim or any(data.shape[i] != self.shape[i] for i in range(self.ndim) if i != ax):
            raise OpError(f"gather: index of shape {tuple(data.shape)} does not fit a tensor of shape "
                          f"{self.shape} along axis {ax}")
        return apply(ops.Gather, self, index=data, axis=ax)

    def __getitem__(self, index: Any) -> Tensor:
        index = _convert_index(index)
        try:
            return apply(ops.GetItem, self, index=index)
        except IndexError as exc:
            raise IndexError(f"getitem: index {index!r} is invalid for shape {self.shape}: {exc}") from None

# ---------------------------------------------------------------------- apply
def apply(fn: type[Function], *inputs: Tensor, **params: Any) -> Tensor:
    """Run an op's forward on the inputs' arrays and record a graph node if needed."""
    backend = inputs[0]._backend
    needs = tuple(t.requires_grad for t in inputs)
    record = is_grad_enabled() and any(needs)
    ctx = Context(backend, needs)
    with backend.device_scope(), np.errstate(all="ignore"):
        out = fn.forward(ctx, *[t.data for t in inputs], **params)
    dtype = inputs[0].dtype
    if out.dtype != dtype and fn is not ops.Cast and _is_float(dtype):
        out = out.astype(dtype)  # some 16-bit NumPy loops (ml_dtypes matmul) return float32
    if not record:
        return Tensor(out, _backend=backend)
    return Tensor(out, requires_grad=True, _node=Node(fn, ctx, inputs), _backend=backend)


class _Transfer(Function):
    """Copy to another device; the gradient is copied back."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, target: Backend) -> Any:
        ctx.source = ctx.backend
        return target.asarray(x)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (ctx.source.asarray(grad),)


def _transfer(x: Tensor, target: Backend) -> Tensor:
    ctx = Context(x._backend, (x.requires_grad,))
    out = _Transfer.forward(ctx, x.data, target=target)
    if is_grad_enabled() and x.requires_grad:
        return Tensor(out, requires_grad=True, _node=Node(_Transfer, ctx, (x,)), _backend=target)
    return Tensor(out, _backend=target)


# ---------------------------------------------------------------- coercion
def _as_operand(value: Any, like: Tensor, op: str) -> Tensor:
    """A Tensor for ``value``: tensors are checked, numbers and arrays become constants."""
    if isinstance(value, Tensor):
        if value.device != like.device:
            raise ValueError(
                f"{op}: tensors are on different devices: {like.device} and {value.device}; "
                "move one with .to(device)"
            )
        return value
    if isinstance(value, bool | int | float | np.number):
        return Tensor(like._backend.xp.asarray(value, dtype=like.dtype), _backend=like._backend)
    if isinstance(value, list | tuple | np.ndarray) or like._backend.is_array(value):
        return Tensor(like._backend.asarray(value, dtype=like.dtype), _backend=like._backend)
    raise TypeError(f"{op}: cannot combine a Tensor with {type(value).__name__}")


def _check_binary(op: str, a: Tensor, b: Tensor) -> None:
    if a.dtype != b.dtype:
        raise TypeError(
            f"{op}: dtype mismatch: {a.dtype.name} and {b.dtype.name}; cast one with .to(dtype=...)"
        )
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise OpError(f"{op}: shapes {a.shape} and {b.shape} cannot be broadcast together") from None


def _binary(fn: type[Function], op: str, a: Any, b: Any) -> Tensor:
    like = a if isinstance(a, Tensor) else b
    a = _as_operand(a, like, op)
    b = _as_operand(b, like, op)
    _check_binary(op, a, b)
    return apply(fn, a, b)


def _compare(a: Tensor, other: Any, name: str) -> Tensor:
    b = _as_operand(other, a, name)
    _check_binary(name, a, b)
    return Tensor(getattr(a._backend.xp, name)(a.data, b.data), _backend=a._backend)


def _logical(a: Tensor, other: Any, name: str, symbol: str) -> Tensor:
    b = _as_operand(other, a, symbol)
    _check_logical(a, symbol)
    _check_logical(b, symbol)
    _check_binary(symbol, a, b)
    return Tensor(getattr(a._backend.xp, name)(a.data, b.data), _backend=a._backend)


def _check_logical(x: Tensor, symbol: str) -> None:
    if x.dtype.kind not in "biu":
        raise TypeError(f"{symbol}: needs bool (or integer) tensors, got {x.dtype.name}; "
                        "make a mask by comparing first, e.g. (x > 0)")


def _reduce(fn: type[Function], op: str, x: Tensor, axis: Any, keepdims: bool, dim: Any = None,
            keepdim: bool | None = None) -> Tensor:
    axes = normalize_axes(axis_argument(op, axis, dim), x.ndim, op, x.shape)
    return apply(fn, x, axes=axes, keepdims=keepdims_argument(op, keepdims, keepdim))


def _along_axis(fn: type[Function], op: str, x: Tensor, axis: int | None, dim: int | None) -> Tensor:
    chosen = axis_argument(op, axis, dim)
    return apply(fn, x, axis=normalize_axis(-1 if chosen is None else chosen, x.ndim, op, x.shape))


def _extreme(x: Tensor, op: str, axis: Any, keepdims: bool, dim: int | None, keepdim: bool | None) -> Any:
    """``max``/``min`` in their three forms (see ``Tensor.max``)."""
    if isinstance(axis, Tensor):
        return _binary(ops.Maximum if op == "max" else ops.Minimum, op, x, axis)
    if x.size == 0:
        raise OpError(f"{op}: cannot reduce an empty tensor of shape {x.shape}")
    if dim is None:
        return _reduce(ops.Max if op == "max" else ops.Min, op, x, axis, keepdims, None, keepdim)
    if axis is not None or not isinstance(dim, int):
        raise TypeError(f"{op}: dim= (PyTorch's form, returning values and indices) takes one int axis; "
                        f"got axis={axis!r}, dim={dim!r}")
    keep = keepdims_argument(op, keepdims, keepdim)
    indices = _arg_extreme(x, "arg" + op, dim, True, None, None)
    values = x.gather(dim, indices)  # the gradient goes to the chosen index, as PyTorch's
    if not keep:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return ValuesIndices(values, indices)


def _arg_extreme(x: Tensor, op: str, axis: int | None, keepdims: bool, dim: int | None,
                 keepdim: bool | None) -> Tensor:
    chosen = axis_argument(op, axis, dim)
    if x.size == 0:
        raise OpError(f"{op}: cannot reduce an empty tensor of shape {x.shape}")
    ax = None if chosen is None else normalize_axis(chosen, max(x.ndim, 1), op, x.shape)
    data = x.data if x.ndim else x.data.reshape(1)
    out = getattr(x._backend.xp, op)(data, axis=ax, keepdims=keepdims_argument(op, keepdims, keepdim))
    return Tensor(out.astype(int64), _backend=x._backend)


def _shape_arguments(values: tuple[Any, ...]) -> tuple[int, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` alike."""
    return tuple(values[0]) if len(values) == 1 and not isinstance(values[0], int) else tuple(values)


def _pieces(x: Tensor, axis: int, sizes: Sequence[int]) -> tuple[Tensor, ...]:
    pieces = []
    start = 0
    for size in sizes:
        index = (slice(None),) * axis + (slice(start, start + size),)
        pieces.append(x[index])
        start += size
    return tuple(pieces)


def _triangle(x: Tensor, op: str, diagonal: int) -> Any:
    """Bool array of the last two axes' shape, True on and below the ``diagonal``-th diagonal."""
    if x.ndim < 2:
        raise OpError(f"{op}: needs at least 2 axes, got shape {x.shape}")
    return x._backend.xp.tri(x.shape[-2], x.shape[-1], k=diagonal, dtype=bool)


def _check_reshape(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(shape)
    unknown = [i for i, s in enumerate(target) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in target):
        raise OpError(f"reshape: invalid target shape {target}")
    known = math.prod(s for s in target if s != -1)
    if unknown:
        if known == 0 or size % known:
            raise OpError(f"reshape: cannot reshape a tensor of shape {shape} ({size} elements) into {target}")
        target = tuple(size // known if s == -1 else s for s in target)
    if math.prod(target) != size:
        raise OpError(f"reshape: cannot reshape a tensor of shape {shape} ({size} elements) into {target}")
    return target


def _convert_index(index: Any) -> Any:
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(_convert_index(i) for i in index)
    if isinstance(index, list):
        return np.asarray(index)
    return index


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product; 1-D operands are treated as a row (left) or column (right) vector."""
    b = _as_operand(b, a, "matmul")
    if a.dtype != b.dtype:
        raise TypeError(f"matmul: dtype mismatch: {a.dtype.name} and {b.dtype.name}")
    if a.ndim == 0 or b.ndim == 0:
        raise OpError(f"matmul: operands must have at least 1 axis, got shapes {a.shape} and {b.shape}")
    left, right = a, b
    if a.ndim == 1:
        left = a.reshape(1, -1)
    if b.ndim == 1:
        right = b.reshape(-1, 1)
    if left.shape[-1] != right.shape[-2]:
        raise OpError(
            f"matmul: shapes {a.shape} and {b.shape} are not aligned: "
            f"{left.shape[-1]} (last axis of the first) != {right.shape[-2]} (second-to-last of the second)"
        )
    try:
        np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    except ValueError:
        raise OpError(f"matmul: batch shapes of {a.shape} and {b.shape} cannot be broadcast") from None
    out = apply(ops.MatMul, left, right)
    if a.ndim == 1 and b.ndim == 1:
        return out.reshape(())
    if a.ndim == 1:
        return out.reshape(out.shape[:-2] + out.shape[-1:])
    if b.ndim == 1:
        return out.reshape(out.shape[:-1])
    return out

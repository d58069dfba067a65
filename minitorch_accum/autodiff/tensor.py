"""The Tensor: a backend array plus, when it needs a gradient, the node that made it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
    parse_device,
    resolve_dtype,
)
from minitorch_accum.backend.device import Device
from minitorch_accum.ops.axes import normalize_axes, normalize_axis
from minitorch_accum.ops.function import Context, Function, OpError

__all__ = ["Tensor", "apply", "tensor"]


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def _resolve_any_dtype(dtype: Any) -> np.dtype:
    """Float dtypes by name, plus integer and bool dtypes for ids, targets and masks."""
    try:
        return resolve_dtype(dtype)
    except TypeError:
        resolved = np.dtype(dtype)
        if resolved.kind in "iub":
            return resolved
        raise


class Tensor:
    """An n-dimensional array on a device, with reverse-mode differentiation.

    ``data`` is the backend array (``numpy.ndarray`` on the CPU, ``cupy.ndarray`` on
    a GPU). A tensor made by an op from inputs that require grad remembers how it
    was made, so ``backward()`` can return the gradients of the leaves.
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
    def device(self) -> Device:
        return self._backend.device

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return int(self.data.size)

    @property
    def is_leaf(self) -> bool:
        return self._node is None

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
            target = _resolve_any_dtype(dtype)
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

    __hash__ = object.__hash__

    # ------------------------------------------------------------ unary math
    def exp(self) -> Tensor:
        return apply(ops.Exp, self)

    def log(self) -> Tensor:
        return apply(ops.Log, self)

    def sqrt(self) -> Tensor:
        return apply(ops.Sqrt, self)

    def tanh(self) -> Tensor:
        return apply(ops.Tanh, self)

    def sigmoid(self) -> Tensor:
        return apply(ops.Sigmoid, self)

    def relu(self) -> Tensor:
        return apply(ops.Relu, self)

    def gelu(self) -> Tensor:
        return apply(ops.Gelu, self)

    # ------------------------------------------------------------ reductions
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return _reduce(ops.Sum, "sum", self, axis, keepdims)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return _reduce(ops.Mean, "mean", self, axis, keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        if self.size == 0:
            raise OpError(f"max: cannot reduce an empty tensor of shape {self.shape}")
        return _reduce(ops.Max, "max", self, axis, keepdims)

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return _reduce(ops.LogSumExp, "logsumexp", self, axis, keepdims)

    def softmax(self, axis: int = -1) -> Tensor:
        return apply(ops.Softmax, self, axis=normalize_axis(axis, self.ndim, "softmax", self.shape))

    def log_softmax(self, axis: int = -1) -> Tensor:
        return apply(ops.LogSoftmax, self,
                     axis=normalize_axis(axis, self.ndim, "log_softmax", self.shape))

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        target = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return apply(ops.Reshape, self, shape=_check_reshape(self.shape, tuple(target)))

    def flatten(self, start_axis: int = 0) -> Tensor:
        start = normalize_axis(start_axis, max(self.ndim, 1), "flatten", self.shape)
        return self.reshape(self.shape[:start] + (-1,))

    def permute(self, *axes: int | Sequence[int]) -> Tensor:
        order = tuple(axes[0]) if len(axes) == 1 and not isinstance(axes[0], int) else axes
        if sorted(normalize_axis(a, self.ndim, "permute", self.shape) for a in order) != list(range(self.ndim)):
            raise OpError(f"permute: {tuple(order)} is not a permutation of the axes of shape {self.shape}")
        return apply(ops.Permute, self, axes=tuple(a % self.ndim for a in order))

    def transpose(self, axis0: int = -2, axis1: int = -1) -> Tensor:
        """Swap two axes (the last two by default)."""
        if self.ndim < 2:
            raise OpError(f"transpose: needs at least 2 axes, got shape {self.shape}")
        order = list(range(self.ndim))
        a = normalize_axis(axis0, self.ndim, "transpose", self.shape)
        b = normalize_axis(axis1, self.ndim, "transpose", self.shape)
        order[a], order[b] = order[b], order[a]
        return apply(ops.Permute, self, axes=tuple(order))

    @property
    def T(self) -> Tensor:
        """All axes reversed (the matrix transpose for 2-D tensors)."""
        return apply(ops.Permute, self, axes=tuple(reversed(range(self.ndim))))

    def broadcast_to(self, shape: Sequence[int]) -> Tensor:
        target = tuple(shape)
        try:
            np.broadcast_shapes(self.shape, target)
        except ValueError:
            raise OpError(f"broadcast_to: cannot broadcast shape {self.shape} to {target}") from None
        if np.broadcast_shapes(self.shape, target) != target:
            raise OpError(f"broadcast_to: cannot broadcast shape {self.shape} to {target}")
        return apply(ops.BroadcastTo, self, shape=target)

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


def _reduce(fn: type[Function], op: str, x: Tensor, axis: Any, keepdims: bool) -> Tensor:
    return apply(fn, x, axes=normalize_axes(axis, x.ndim, op, x.shape), keepdims=keepdims)


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


def tensor(data: Any, dtype: Any = None, device: DeviceLike | None = "cpu",
           requires_grad: bool = False) -> Tensor:
    """Make a tensor from nested lists, a NumPy/CuPy array or a number.

    The default dtype is float32, except that an integer or bool array keeps its
    dtype; integer and bool tensors serve as ids, targets and masks (they cannot
    require grad).
    """
    backend = backend_for(device)
    if isinstance(data, Tensor):
        data = data.data
    if dtype is None:
        kind = getattr(getattr(data, "dtype", None), "kind", "f")
        dtype = data.dtype if kind in "iub" else "float32"
    target = _resolve_any_dtype(dtype)
    array = backend.asarray(data, dtype=target)
    return Tensor(array, requires_grad=requires_grad, _backend=backend)

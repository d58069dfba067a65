"""Elementwise ops: arithmetic and activation functions, each forward beside its backward.

Inputs of a binary op may broadcast; backward returns gradients in the broadcast
shape and the engine sums them back to each input's shape.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = [
    "GELU_APPROXIMATIONS",
    "Abs",
    "Add",
    "Clamp",
    "Div",
    "Exp",
    "Gelu",
    "Log",
    "MaskedFill",
    "Maximum",
    "Minimum",
    "Mul",
    "Neg",
    "Pow",
    "PowScalar",
    "Relu",
    "Rsqrt",
    "Sigmoid",
    "Sqrt",
    "Sub",
    "Tanh",
    "Where",
]


class Add(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        return ctx.backend.add(a, b)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        return grad, grad


class Sub(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        return a - b

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        return grad, (-grad if ctx.needs_input_grad[1] else None)


class Mul(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save(a, b)
        return a * b

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b = ctx.saved
        return (
            grad * b if ctx.needs_input_grad[0] else None,
            grad * a if ctx.needs_input_grad[1] else None,
        )


class Div(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save(a, b)
        return a / b

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b = ctx.saved
        grad_a = grad / b
        grad_b = -grad_a * a / b if ctx.needs_input_grad[1] else None
        return (grad_a if ctx.needs_input_grad[0] else None), grad_b


class Pow(Function):
    """a ** b for two tensors: d/da = b a^(b-1), d/db = a^b log a.

    Where the limits are 0 PyTorch gives 0 and so does this op: d/da where b = 0
    (0 * 0^-1 would be nan at a = 0) and d/db where a = 0 and b >= 0 (0 * log 0)."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        out = a**b
        ctx.save(a, b, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b, out = ctx.saved
        xp = ctx.xp
        zero = xp.zeros((), dtype=grad.dtype)
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = grad * xp.where(b == 0, zero, b * a ** (b - 1))
        if ctx.needs_input_grad[1]:
            grad_b = grad * xp.where((a == 0) & (b >= 0), zero, out * xp.log(a))
        return grad_a, grad_b


class PowScalar(Function):
    """x ** p for a Python number p; p = 0 has gradient 0 everywhere (x = 0 included), as in PyTorch."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, exponent: float) -> Any:
        ctx.save(x)
        ctx.exponent = exponent
        return x**exponent

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (x,) = ctx.saved
        p = ctx.exponent
        if p == 0.0:
            return (ctx.xp.zeros_like(grad),)
        return (grad * (p * x ** (p - 1)),)


class Neg(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        return -x

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (-grad,)


class _Unary(Function):
    """A unary op whose derivative is a function of one saved array: its output (exp, sqrt,
    tanh: nothing else is kept) or, with ``saves_input``, its input (log, abs). A subclass
    gives the value and the rule; the rest is shared."""

    saves_input = False

    @staticmethod
    @abstractmethod
    def value(xp: Any, x: Any) -> Any:
        """The op's output for input ``x``."""

    @staticmethod
    @abstractmethod
    def input_grad(xp: Any, grad: Any, saved: Any) -> Any:
        """The input's gradient from the output's and the saved array."""

    @classmethod
    def forward(cls, ctx: Context, x: Any) -> Any:
        out = cls.value(ctx.xp, x)
        ctx.save(x if cls.saves_input else out)
        return out

    @classmethod
    def backward(cls, ctx: Context, grad: Any) -> tuple[Any]:
        (saved,) = ctx.saved
        return (cls.input_grad(ctx.xp, grad, saved),)


class Exp(_Unary):
    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        return xp.exp(x)

    @staticmethod
    def input_grad(xp: Any, grad: Any, out: Any) -> Any:
        return grad * out


class Log(_Unary):
    saves_input = True

    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        return xp.log(x)

    @staticmethod
    def input_grad(xp: Any, grad: Any, x: Any) -> Any:
        return grad / x


class Sqrt(_Unary):
    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        return xp.sqrt(x)

    @staticmethod
    def input_grad(xp: Any, grad: Any, out: Any) -> Any:
        return grad / (out + out)


class Rsqrt(_Unary):
    """1 / sqrt(x); d/dx = -out^3 / 2."""

    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        return 1.0 / xp.sqrt(x)

    @staticmethod
    def input_grad(xp: Any, grad: Any, out: Any) -> Any:
        return grad * (-0.5 * out * out * out)


class Tanh(_Unary):
    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        return xp.tanh(x)

    @staticmethod
    def input_grad(xp: Any, grad: Any, out: Any) -> Any:
        return grad * (1.0 - out * out)


class Sigmoid(_Unary):
    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        # 0.5 * (1 + tanh(x / 2)) never overflows, unlike 1 / (1 + exp(-x))
        return 0.5 * (xp.tanh(0.5 * x) + 1.0)

    @staticmethod
    def input_grad(xp: Any, grad: Any, out: Any) -> Any:
        return grad * out * (1.0 - out)


class Relu(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        positive = x > 0
        ctx.save(positive)
        return x * positive

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (positive,) = ctx.saved
        return (grad * positive,)


_GELU_C = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_APPROXIMATIONS = ("none", "tanh")


class Gelu(Function):
    """GELU, PyTorch's two forms (float32 and float64 by the fused kernels, each in its own dtype:
    tests/kernels/test_kernel_fused_accuracy.py states the float32 bounds; other dtypes by the
    array library).

    ``approximate="none"``: x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), derivative Phi(x) + x phi(x).
    ``approximate="tanh"``: 0.5 x (1 + tanh(c (x + a x^3))), c = sqrt(2/pi), a = 0.044715 (GPT-2's).
    """

    @staticmethod
    def forward(ctx: Context, x: Any, *, approximate: str) -> Any:
        ctx.approximate = approximate
        if ctx.backend.fuses(x.dtype):  # one fused kernel each way; backward needs only x
            ctx.save(x)
            return ctx.backend.gelu(x, approximate)
        if approximate == "tanh":
            t = ctx.xp.tanh(_GELU_C * (x + _GELU_A * x * x * x))
            ctx.save(x, t)
            return 0.5 * x * (1.0 + t)
        cdf = 0.5 * (1.0 + ctx.backend.erf(x * _SQRT_HALF))
        ctx.save(x, cdf)
        return x * cdf

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        if len(ctx.saved) == 1:
            return (ctx.backend.gelu_backward(ctx.saved[0], grad, ctx.approximate),)
        if ctx.approximate == "tanh":
            x, t = ctx.saved
            inner_grad = _GELU_C * (1.0 + 3.0 * _GELU_A * x * x)
            return (grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_grad),)
        x, cdf = ctx.saved
        pdf = _INV_SQRT_2PI * ctx.xp.exp(-0.5 * x * x)
        return (grad * (cdf + x * pdf),)


class Maximum(Function):
    """Elementwise max of two tensors; a tie sends half the gradient to each side (as PyTorch)."""

    @staticmethod
    def _pick(xp: Any, a: Any, b: Any) -> Any:
        return xp.maximum(a, b)

    @staticmethod
    def _first_wins(a: Any, b: Any) -> Any:
        return a > b

    @classmethod
    def forward(cls, ctx: Context, a: Any, b: Any) -> Any:
        ctx.save(a, b)
        return cls._pick(ctx.xp, a, b)

    @classmethod
    def backward(cls, ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b = ctx.saved
        share_a = cls._first_wins(a, b) + 0.5 * (a == b)
        share_a = share_a.astype(grad.dtype, copy=False)
        return grad * share_a, grad * (1.0 - share_a)


class Minimum(Maximum):
    """Elementwise min of two tensors; a tie sends half the gradient to each side (as PyTorch)."""

    @staticmethod
    def _pick(xp: Any, a: Any, b: Any) -> Any:
        return xp.minimum(a, b)

    @staticmethod
    def _first_wins(a: Any, b: Any) -> Any:
        return a < b


class Abs(_Unary):
    """|x|; the gradient at 0 is 0 (sign(0)), as in PyTorch."""

    saves_input = True

    @staticmethod
    def value(xp: Any, x: Any) -> Any:
        return xp.abs(x)

    @staticmethod
    def input_grad(xp: Any, grad: Any, x: Any) -> Any:
        return grad * xp.sign(x)


class Clamp(Function):
    """x limited to [low, high] (either may be None); the gradient passes where
    low <= x <= high, bounds included, as in PyTorch."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, low: float | None, high: float | None) -> Any:
        xp = ctx.xp
        inside = xp.ones(x.shape, dtype=bool)
        out = x
        if low is not None:
            inside &= x >= low
            out = xp.maximum(out, x.dtype.type(low))
        if high is not None:
            inside &= x <= high
            out = xp.minimum(out, x.dtype.type(high))
        ctx.save(inside)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (inside,) = ctx.saved
        return (grad * inside,)


class MaskedFill(Function):
    """``value`` where the bool ``mask`` (broadcast to x's shape) is set, x elsewhere;
    the filled places take no gradient."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, mask: Any, value: Any) -> Any:
        ctx.mask = mask
        return ctx.xp.where(mask, x.dtype.type(value), x)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (ctx.xp.where(ctx.mask, grad.dtype.type(0), grad),)


class Where(Function):
    """condition ? a : b, with a boolean condition array that takes no gradient."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any, *, condition: Any) -> Any:
        ctx.condition = condition
        return ctx.xp.where(condition, a, b)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        xp = ctx.xp
        zero = xp.zeros((), dtype=grad.dtype)
        cond = ctx.condition
        return (
            xp.where(cond, grad, zero) if ctx.needs_input_grad[0] else None,
            xp.where(cond, zero, grad) if ctx.needs_input_grad[1] else None,
        )


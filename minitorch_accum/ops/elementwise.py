"""Elementwise ops: arithmetic and activation functions, each forward beside its backward.

Inputs of a binary op may broadcast; backward returns gradients in the broadcast
shape and the engine sums them back to each input's shape.
"""

from __future__ import annotations

import math
from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = [
    "Add",
    "Cast",
    "Div",
    "Exp",
    "Gelu",
    "Log",
    "Maximum",
    "Mul",
    "Neg",
    "Pow",
    "PowScalar",
    "Relu",
    "Sigmoid",
    "Sqrt",
    "Sub",
    "Tanh",
    "Where",
]


class Add(Function):
    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        return a + b

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
    """a ** b for two tensors: d/da = b a^(b-1), d/db = a^b log a."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        out = a**b
        ctx.save(a, b, out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b, out = ctx.saved
        xp = ctx.xp
        grad_a = grad * b * a ** (b - 1) if ctx.needs_input_grad[0] else None
        grad_b = grad * out * xp.log(a) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class PowScalar(Function):
    """x ** p for a Python number p."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, exponent: float) -> Any:
        ctx.save(x)
        ctx.exponent = exponent
        return x**exponent

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (x,) = ctx.saved
        p = ctx.exponent
        return (grad * (p * x ** (p - 1)),)


class Neg(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        return -x

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (-grad,)


class Exp(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        out = ctx.xp.exp(x)
        ctx.save(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (out,) = ctx.saved
        return (grad * out,)


class Log(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        ctx.save(x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (x,) = ctx.saved
        return (grad / x,)


class Sqrt(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        out = ctx.xp.sqrt(x)
        ctx.save(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (out,) = ctx.saved
        return (grad / (out + out),)


class Tanh(Function):
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        out = ctx.xp.tanh(x)
        ctx.save(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (out,) = ctx.saved
        return (grad * (1.0 - out * out),)


class Sigmoid(Function):
    # 0.5 * (1 + tanh(x / 2)) never overflows, unlike 1 / (1 + exp(-x)).
    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        out = 0.5 * (ctx.xp.tanh(0.5 * x) + 1.0)
        ctx.save(out)
        return out

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        (out,) = ctx.saved
        return (grad * out * (1.0 - out),)


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


class Gelu(Function):
    """GELU, tanh form: 0.5 x (1 + tanh(c (x + a x^3))), c = sqrt(2/pi), a = 0.044715."""

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        t = ctx.xp.tanh(_GELU_C * (x + _GELU_A * x * x * x))
        ctx.save(x, t)
        return 0.5 * x * (1.0 + t)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        x, t = ctx.saved
        inner_grad = _GELU_C * (1.0 + 3.0 * _GELU_A * x * x)
        return (grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_grad),)


class Maximum(Function):
    """Elementwise max of two tensors; a tie sends half the gradient to each side."""

    @staticmethod
    def forward(ctx: Context, a: Any, b: Any) -> Any:
        ctx.save(a, b)
        return ctx.xp.maximum(a, b)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, Any]:
        a, b = ctx.saved
        share_a = (a > b) + 0.5 * (a == b)
        share_a = share_a.astype(grad.dtype, copy=False)
        return grad * share_a, grad * (1.0 - share_a)


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


class Cast(Function):
    """Change dtype; the gradient is cast back to the input's dtype."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, dtype: Any) -> Any:
        ctx.input_dtype = x.dtype
        return x.astype(dtype)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad.astype(ctx.input_dtype),)

"""Ops that move data without arithmetic: reshape, permute, indexing, concatenate, stack, repeat."""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function

__all__ = ["BroadcastTo", "Concatenate", "Gather", "GetItem", "Permute", "Repeat", "Reshape", "Stack"]


class Reshape(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, shape: tuple[int, ...]) -> Any:
        ctx.input_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad.reshape(ctx.input_shape),)


class Permute(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, axes: tuple[int, ...]) -> Any:
        ctx.axes = axes
        return ctx.xp.transpose(x, axes)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        inverse = [0] * len(ctx.axes)
        for position, axis in enumerate(ctx.axes):
            inverse[axis] = position
        return (ctx.xp.transpose(grad, inverse),)


class BroadcastTo(Function):
    @staticmethod
    def forward(ctx: Context, x: Any, *, shape: tuple[int, ...]) -> Any:
        return ctx.xp.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        return (grad,)  # the engine sums it back to the input's shape


def _is_advanced(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(not isinstance(p, (int, slice, type(None), type(Ellipsis))) for p in parts)


class GetItem(Function):
    """``x[index]``; backward scatters the gradient back (repeated indices add up)."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, index: Any) -> Any:
        ctx.index, ctx.shape, ctx.dtype = index, x.shape, x.dtype
        return x[index]

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        out = ctx.xp.zeros(ctx.shape, dtype=ctx.dtype)
        if _is_advanced(ctx.index):
            ctx.backend.scatter_add(out, ctx.index, grad)
        else:
            out[ctx.index] = grad
        return (out,)


class Gather(Function):
    """``out[..., i, ...] = x[..., index[..., i, ...], ...]`` along ``axis`` (PyTorch's gather);
    backward adds each gradient back at the place it was taken from (repeats add up)."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, index: Any, axis: int) -> Any:
        ctx.index, ctx.axis, ctx.shape, ctx.dtype = index, axis, x.shape, x.dtype
        return ctx.xp.take_along_axis(x, index, axis=axis)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        xp = ctx.xp
        out = xp.zeros(ctx.shape, dtype=ctx.dtype)
        # the full coordinates of every gathered element: open ranges, with the index on the axis
        where = list(xp.ogrid[tuple(slice(n) for n in ctx.index.shape)])
        where[ctx.axis] = ctx.index
        ctx.backend.scatter_add(out, tuple(where), grad)
        return (out,)


class Concatenate(Function):
    @staticmethod
    def forward(ctx: Context, *arrays: Any, axis: int) -> Any:
        ctx.axis = axis
        ctx.sizes = [a.shape[axis] for a in arrays]
        return ctx.xp.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, ...]:
        pieces = []
        start = 0
        for size in ctx.sizes:
            index = [slice(None)] * grad.ndim
            index[ctx.axis] = slice(start, start + size)
            pieces.append(grad[tuple(index)])
            start += size
        return tuple(pieces)


class Stack(Function):
    @staticmethod
    def forward(ctx: Context, *arrays: Any, axis: int) -> Any:
        ctx.axis = axis
        ctx.count = len(arrays)
        return ctx.xp.stack(arrays, axis=axis)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any, ...]:
        return tuple(ctx.xp.take(grad, i, axis=ctx.axis) for i in range(ctx.count))


class Repeat(Function):
    """The input tiled ``repeats[i]`` times along axis i (PyTorch's ``repeat``, NumPy's ``tile``);
    ``repeats`` may be longer than the input's rank, which is then read with leading axes of 1.
    The gradient of each input element is the sum over its copies."""

    @staticmethod
    def forward(ctx: Context, x: Any, *, repeats: tuple[int, ...]) -> Any:
        padded = (1,) * (len(repeats) - x.ndim) + tuple(x.shape)
        ctx.input_shape, ctx.padded, ctx.repeats = x.shape, padded, repeats
        return ctx.xp.tile(x.reshape(padded), repeats)

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        # axis i of the output is (copy, element) = (repeats[i], padded[i]): sum out every copy axis
        split = tuple(n for pair in zip(ctx.repeats, ctx.padded, strict=True) for n in pair)
        summed = grad.reshape(split).sum(axis=tuple(range(0, len(split), 2)))
        return (summed.reshape(ctx.input_shape),)

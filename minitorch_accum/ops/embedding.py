"""Embedding lookup: rows of a weight table gathered by integer ids."""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function, OpError

__all__ = ["Embedding"]


class Embedding(Function):
    @staticmethod
    def forward(ctx: Context, weight: Any, *, ids: Any) -> Any:
        # checked here, not by the caller, so that a replayed call checks its ids too
        count = weight.shape[0]
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= count):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise OpError(f"embedding: id {bad} is out of range for {count} embeddings")
        ctx.ids, ctx.shape, ctx.dtype = ids, weight.shape, weight.dtype
        return weight[ids]

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        if ctx.backend.fuses(ctx.dtype):  # a counting sort of the ids, no np.add.at
            rows = ctx.backend.embedding_backward(ctx.ids.reshape(-1), grad.reshape(-1, ctx.shape[1]), ctx.shape[0])
            return (rows,)
        out = ctx.xp.zeros(ctx.shape, dtype=ctx.dtype)
        # an id that occurs several times gets the sum of its rows' gradients
        ctx.backend.scatter_add(out, ctx.ids.reshape(-1), grad.reshape(-1, ctx.shape[1]))
        return (out,)

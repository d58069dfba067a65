"""Cross entropy fused with log-softmax: per-item losses, padding ignored."""

from __future__ import annotations

from typing import Any

from minitorch_accum.ops.function import Context, Function, OpError
from minitorch_accum.ops.softmax import stable_log_softmax

__all__ = ["CrossEntropy"]


class CrossEntropy(Function):
    """-log softmax(logits)[target] per item; items whose target is ``ignore_index`` give 0.

    Backward is softmax - one_hot. float32 and float64 logits take the fused kernels (the
    logits and each row's log-sum-exp are kept for backward); other dtypes keep the
    log-probabilities.
    """

    @staticmethod
    def forward(ctx: Context, logits: Any, *, targets: Any, ignore_index: int) -> Any:
        xp = ctx.xp
        classes = logits.shape[-1]
        valid = targets != ignore_index
        bad = valid & ((targets < 0) | (targets >= classes))
        if bool(bad.any()):
            first = int(targets[bad].ravel()[0])
            raise OpError(
                f"cross_entropy: target {first} is out of range for {classes} classes "
                f"(ignore_index={ignore_index})"
            )
        ctx.fused = ctx.backend.fuses(logits.dtype)
        if ctx.fused:
            # one fused pass over the logits; backward reads them and each row's log-sum-exp
            rows = xp.ascontiguousarray(logits.reshape(-1, classes))
            flat_targets = targets.reshape(-1)
            losses, lse, _ = ctx.backend.cross_entropy(rows, flat_targets, ignore_index)
            ctx.save(rows, flat_targets, lse)
            ctx.ignore_index = ignore_index
            return losses.reshape(targets.shape)
        safe = xp.where(valid, targets, 0)
        log_probs = stable_log_softmax(xp, logits, -1)
        picked = xp.take_along_axis(log_probs, safe[..., None], axis=-1)[..., 0]
        ctx.save(log_probs, safe, valid)
        return xp.where(valid, -picked, xp.zeros((), dtype=logits.dtype))

    @staticmethod
    def backward(ctx: Context, grad: Any) -> tuple[Any]:
        if ctx.fused:
            rows, flat_targets, lse = ctx.saved
            out = ctx.backend.cross_entropy_backward(rows, flat_targets, lse, grad.reshape(-1), ctx.ignore_index)
            return (out.reshape(*grad.shape, rows.shape[-1]),)
        log_probs, safe, valid = ctx.saved
        xp = ctx.xp
        weight = (grad * valid).astype(log_probs.dtype)
        out = xp.exp(log_probs) * weight[..., None]
        classes = log_probs.shape[-1]
        flat = out.reshape(-1, classes)
        rows = xp.arange(flat.shape[0])
        flat[rows, safe.reshape(-1)] -= weight.reshape(-1)
        return (out,)

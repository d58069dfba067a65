"""The properties of whole optimizer steps on the user's model: k x b equals k*b after N steps
(SGD and AdamW, a scheduled rate, an epoch shorter than k included), and R data-parallel ranks
x k equal one process with R*k micro-batches."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from minitorch_accum.autodiff import Gradients
from minitorch_accum.optim import SGD, AdamW, Optimizer
from minitorch_accum.optim.lr_scheduler import StepLR
from minitorch_accum.testing.check_context import CheckContext, parts_of
from minitorch_accum.testing.parameter_bound import UNIT_ROUNDOFF, Tolerance
from minitorch_accum.testing.property_results import PropertyResult

__all__ = ["OPTIMIZERS", "data_parallel_equals_one_rank", "displacement_tolerance", "steps_equal_big_batch"]

#: the optimizers k x b == k*b is checked with (weight decay on, so that a decay applied per
#: micro-batch shows; Adam's bias correction counts windows, so a counter per micro-batch shows)
OPTIMIZERS: dict[str, Callable[[], Optimizer]] = {
    "SGD(momentum=0.9, nesterov, weight_decay=0.01)": lambda: SGD(0.1, momentum=0.9, nesterov=True,
                                                                  weight_decay=0.01),
    "AdamW(lr=0.01, weight_decay=0.1)": lambda: AdamW(lr=0.01, weight_decay=0.1),
}


def displacement_tolerance(initial: dict[str, np.ndarray], final: dict[str, np.ndarray], dtype: str,
                            steps: int) -> Tolerance:
    """sqrt(u) of each parameter's largest movement from ``initial`` to ``final`` over ``steps``
    optimizer steps: what two runs that differ only by rounding may differ by after those steps."""
    u = UNIT_ROUNDOFF[dtype]
    bounds = {name: np.asarray(math.sqrt(u) * float(np.max(np.abs(final[name] - initial[name]), initial=0.0)))
              for name in final}
    return Tolerance(bounds, (
        f"sqrt(u) = {math.sqrt(u):.2e} ({dtype}) of each parameter's largest movement over the {steps} steps: the "
        "two runs' gradients agree to the rounding bound, and N optimizer steps amplify that (Adam up to 1/eps "
        "where a gradient is near zero), so half the digits are asked for; rounding leaves far less, every bug "
        "of the museum far more"))


def _host(model: object) -> dict[str, np.ndarray]:
    return {name: np.asarray(p.numpy(), dtype=np.float64) for name, p in model.named_parameters()}


def steps_equal_big_batch(ctx: CheckContext) -> PropertyResult:
    """k micro-batches per step (k=2, and k larger than the epoch) over ``ctx.epochs`` epochs, with a
    halving learning rate, end at the parameters of plain big-batch steps over the same windows."""
    result = PropertyResult("steps_equal_big_batch",
                            "k x b equals k*b after N optimizer steps (SGD, AdamW, a schedule, a short epoch)")
    subject, recipe = ctx.subject, ctx.recipe
    sizes = ctx.longest_split()
    epoch = parts_of(sizes)
    for label, make in OPTIMIZERS.items():
        for k, kind in ((2, "k=2"), (len(epoch) + 1, f"an epoch of {len(epoch)} micro-batches shorter than k")):
            model, reference = subject.build_identical(2)
            initial = _host(reference)
            optimizer, plain = make(), make()
            recipe.train(subject, model, optimizer, StepLR(optimizer.lr, 1, 0.5), epoch, k, ctx.epochs)
            schedule = StepLR(plain.lr, 1, 0.5)
            steps = 0
            for _ in range(ctx.epochs):
                for start in range(0, len(epoch), k):
                    window = epoch[start:start + k]
                    rows = np.arange(window[0].start, window[-1].stop)
                    by_name = subject.reference_gradient(reference, rows=rows, reduction=ctx.reduction)
                    grads = Gradients()
                    for name, p in reference.named_parameters():
                        grads.set(p, by_name[name].astype(p.dtype))
                    plain.step(reference, grads, lr=schedule.step())
                    steps += 1
            final = _host(reference)
            result.compare(_host(model), final, displacement_tolerance(initial, final, subject.dtype, steps),
                           f"{label}, split {sizes}, {kind}, {ctx.epochs} epochs, lr halving every step")
    return result.settle(ctx.inexact())


def data_parallel_equals_one_rank(ctx: CheckContext) -> PropertyResult:
    """R ranks (threads, each its own model and arena, the library's DataParallel between them) each
    accumulating its share of a window give every rank the big batch's gradient, bit-identical
    across ranks."""
    world = ctx.world_size
    result = PropertyResult("data_parallel_equals_one_rank",
                            f"{world} ranks x k equal one process with {world}*k micro-batches")
    subject = ctx.subject
    sizes = ctx.longest_split()
    parts = parts_of(sizes)
    k = max(1, math.ceil(len(parts) / world))
    shares = [parts[r * k:(r + 1) * k] for r in range(world)]
    per_rank = ctx.recipe.rank_gradients(subject, subject.build_identical(world), shares, k)
    expected = ctx.reference()
    tolerance = ctx.tolerance(len(parts) + world)
    held = ", ".join(f"rank {r}: {len(share)}" for r, share in enumerate(shares))
    for rank, grads in enumerate(per_rank):
        result.compare(grads, expected, tolerance, f"split {sizes} over {world} ranks, k={k} ({held} micro-batches), "
                                                   f"rank {rank}'s gradient")
    agree = Tolerance({name: np.zeros(()) for name in expected},
                      "bit-identical across ranks: each adds the same sums in the same order")
    for rank, grads in enumerate(per_rank[1:], start=1):
        result.compare(grads, per_rank[0], agree, f"rank {rank} against rank 0")
    return result.settle(ctx.inexact())

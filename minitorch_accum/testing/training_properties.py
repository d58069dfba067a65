"""The properties of whole optimizer steps on the user's model: k x b equals k*b after N steps
(SGD and AdamW, a scheduled rate, an epoch shorter than k included), and R data-parallel ranks
x k equal one process with R*k micro-batches."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from minitorch_accum.autodiff import Gradients
from minitorch_accum.nn import Module
from minitorch_accum.optim import SGD, AdamW, Optimizer
from minitorch_accum.optim.lr_scheduler import StepLR
from minitorch_accum.testing.check_context import CheckContext, parts_of
from minitorch_accum.testing.parameter_bound import UNIT_ROUNDOFF, Tolerance, relative_tolerance
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


#: one optimizer step's own roundings, as a relative perturbation of its gradient: the fused step and the
#: plain one each round the moments, the square root, eps, the division, the rate and the decay (8 at
#: most), and both sides err (2)
STEP_ROUNDINGS = 16


def _host(model: object) -> dict[str, np.ndarray]:
    return {name: np.asarray(p.numpy(), dtype=np.float64) for name, p in model.named_parameters()}


def _window_gradient(ctx: CheckContext, model: Module, rows: np.ndarray) -> dict[str, np.ndarray]:
    return ctx.subject.reference_gradient(model, rows=rows, reduction=ctx.reduction, items=ctx.items(model, rows))


def _gradient_bound(ctx: CheckContext, model: Module, rows: np.ndarray, micro_batches: int,
                    gradient: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """How far the accumulated run's gradient of this window may sit from ``gradient``: the rounding bound
    at the current parameters (the caller's rtol when given) plus the step's own roundings."""
    u = UNIT_ROUNDOFF[ctx.subject.dtype]
    bound = (relative_tolerance(ctx.rtol, gradient) if ctx.rtol is not None
             else ctx.bound_at(model, rows, micro_batches)).bounds
    return {name: bound[name] + STEP_ROUNDINGS * u * np.abs(g) for name, g in gradient.items()}


def _step(model: Module, optimizer: Optimizer, gradient: dict[str, np.ndarray], lr: float) -> None:
    grads = Gradients()
    for name, p in model.named_parameters():
        grads.set(p, gradient[name].astype(p.dtype))
    optimizer.step(model, grads, lr=lr)


def _plain_runs(ctx: CheckContext, runs: list[Module], make: Callable[[], Optimizer], epoch: list[slice],
                k: int) -> tuple[int, dict[str, np.ndarray]]:
    """Plain big-batch steps over the same windows: ``runs[0]`` as they are, ``runs[1]`` and ``runs[2]`` with
    every window's gradient moved by + and - its bound and every parameter by -+2u|p| after each step (the
    plain step's rounding of the update, the same way the moved gradient moves it). Returns the steps taken
    and ``runs[0]``'s path length, the sum over steps of |p_t - p_(t-1)|."""
    u = UNIT_ROUNDOFF[ctx.subject.dtype]
    optimizers = [make() for _ in runs]
    schedules = [StepLR(o.lr, 1, 0.5) for o in optimizers]
    before = _host(runs[0])
    path = {name: np.zeros_like(value) for name, value in before.items()}
    steps = 0
    for _ in range(ctx.epochs):
        for start in range(0, len(epoch), k):
            window = epoch[start:start + k]
            rows = np.arange(window[0].start, window[-1].stop)
            gradients = [_window_gradient(ctx, run, rows) for run in runs]
            # the bound at the window's parameters: measured before runs[0] takes its step
            bound = _gradient_bound(ctx, runs[0], rows, len(window), gradients[1]) if len(runs) > 1 else {}
            for sign, run, optimizer, schedule, gradient in zip((0, 1, -1)[:len(runs)], runs, optimizers, schedules,
                                                                 gradients, strict=True):
                if sign:
                    gradient = {name: g + sign * bound[name] for name, g in gradient.items()}
                _step(run, optimizer, gradient, schedule.step())
                if sign:  # the way the moved gradient moves it: a larger gradient steps further down
                    for p in run.parameters():
                        p.data -= p.data.dtype.type(sign * 2.0 * u) * np.abs(p.data)
            after = _host(runs[0])
            for name, value in after.items():
                path[name] += np.abs(value - before[name])
            before = after
            steps += 1
    return steps, path


def _propagated_tolerance(initial: dict[str, np.ndarray], runs: list[Module], dtype: str, steps: int,
                          path: dict[str, np.ndarray]) -> Tolerance:
    u = UNIT_ROUNDOFF[dtype]
    final, plus, minus = (_host(run) for run in runs)
    # the perturbed runs' own arithmetic can round a perturbation of a unit in the last place away, and
    # Adam's update is blind to a relative change of its gradient, so each step's own rounding is added
    # as it stands: per side, the decay and the new value (2 u |p|) and the update's ops (8 u |p_t - p_(t-1)|)
    bounds = {name: 2.0 * np.maximum(np.abs(plus[name] - value), np.abs(minus[name] - value))
              + 4.0 * steps * u * np.maximum(np.abs(initial[name]), np.abs(value)) + STEP_ROUNDINGS * u * path[name]
              for name, value in final.items()}
    return Tolerance(bounds, (
        f"the rounding bound propagated through the {steps} optimizer steps ({dtype}): twice the spread of the "
        "big-batch run when every window's gradient is moved by +- (its rounding bound at the step's parameters "
        f"+ {STEP_ROUNDINGS} u |g| for the step's own roundings) and every parameter by -+ 2 u |p| after each "
        f"step, plus each step's own rounding as it stands (4 u |p| + {STEP_ROUNDINGS} u |p_t - p_(t-1)|); the runs "
        "carry the moved gradients through the optimizer "
        "(Adam's m / (sqrt(v) + eps), the decay, the momentum) and the moved parameters into the next window's "
        "gradient"))


def steps_equal_big_batch(ctx: CheckContext) -> PropertyResult:
    """k micro-batches per step (k=2, and k larger than the epoch) over ``ctx.epochs`` epochs, with a
    halving learning rate, end at the parameters of plain big-batch steps over the same windows, within
    the rounding bound carried through the steps."""
    result = PropertyResult("steps_equal_big_batch",
                            "k x b equals k*b after N optimizer steps (SGD, AdamW, a schedule, a short epoch)")
    subject, recipe = ctx.subject, ctx.recipe
    sizes = ctx.longest_split()
    epoch = parts_of(sizes)
    inexact = ctx.inexact()
    for label, make in OPTIMIZERS.items():
        for k, kind in ((2, "k=2"), (len(epoch) + 1, f"an epoch of {len(epoch)} micro-batches shorter than k")):
            model, *runs = subject.build_identical(2 if inexact else 4)
            initial = _host(model)
            optimizer = make()
            recipe.train(subject, model, optimizer, StepLR(optimizer.lr, 1, 0.5), epoch, k, ctx.epochs)
            steps, path = _plain_runs(ctx, runs, make, epoch, k)
            tolerance = (Tolerance({name: np.zeros(()) for name, _ in model.named_parameters()}, "none (see the "
                                   "notes)") if inexact else _propagated_tolerance(initial, runs, subject.dtype, steps,
                                                                                   path))
            result.compare(_host(model), _host(runs[0]), tolerance,
                           f"{label}, split {sizes}, {kind}, {ctx.epochs} epochs, lr halving every step",
                           split=sizes)
    return result.settle(inexact)


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
                                                   f"rank {rank}'s gradient", split=sizes)
    agree = Tolerance({name: np.zeros(()) for name in expected},
                      "bit-identical across ranks: each adds the same sums in the same order")
    for rank, grads in enumerate(per_rank[1:], start=1):
        result.compare(grads, per_rank[0], agree, f"rank {rank} against rank 0", split=sizes)
    return result.settle(ctx.inexact())

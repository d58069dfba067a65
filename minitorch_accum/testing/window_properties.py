"""The properties of one window, on the user's model: it equals the big batch (any split, full or
partial), it is clipped by its own norm, loss scaling leaves no trace, and a resume mid-window
gives the uninterrupted window bit for bit."""

from __future__ import annotations

import math

import numpy as np

from minitorch_accum.accum import Accumulator, DynamicLossScaler
from minitorch_accum.testing.check_context import CheckContext, parts_of
from minitorch_accum.testing.parameter_bound import Tolerance
from minitorch_accum.testing.property_results import SKIPPED, PropertyResult
from minitorch_accum.testing.recipes import gradient_arrays

__all__ = ["clipping_uses_the_window_norm", "loss_scaling_is_invisible", "resume_mid_window_equals_uninterrupted",
           "window_equals_full_batch"]

#: a power of two: scaling the loss by it and the gradient by its inverse is exact
_LOSS_SCALE = 2.0**8


def _exact(expected: dict[str, np.ndarray], why: str) -> Tolerance:
    return Tolerance({name: np.zeros(()) for name in expected}, why)


def _norm(arrays: dict[str, np.ndarray]) -> float:
    return math.sqrt(sum(float(np.sum(a * a)) for a in arrays.values()))


def window_equals_full_batch(ctx: CheckContext) -> PropertyResult:
    """Every split, as a full window (k = its micro-batches) and as a partial one (k one more,
    closed early), gives the big batch's gradient within the rounding bound for its k."""
    result = PropertyResult("window_equals_full_batch",
                            "the window's gradient equals the big batch's, for any split and a partial window")
    model = ctx.subject.build()
    expected = ctx.reference()
    for sizes in ctx.splits:
        parts = parts_of(sizes)
        tolerance = ctx.tolerance(len(sizes))
        for steps, kind in ((len(sizes), "a full window"), (len(sizes) + 1, "a partial window")):
            source = ctx.recipe.window(ctx.subject, model, parts, steps)
            result.compare(gradient_arrays(source, model), expected, tolerance,
                           f"split {sizes} in {kind} (k={steps})", split=sizes)
    return result.settle(ctx.inexact())


def clipping_uses_the_window_norm(ctx: CheckContext) -> PropertyResult:
    """Clipping to a norm below every micro-batch's share of the gradient gives the big batch's
    gradient clipped by its own norm, not a sum of micro-batches clipped one by one."""
    result = PropertyResult("clipping_uses_the_window_norm",
                            "the window is clipped by its own global norm, not micro-batch by micro-batch")
    sizes = ctx.longest_split()
    parts = parts_of(sizes)
    subject, expected_full = ctx.subject, ctx.reference()
    model = subject.build()
    _, items = subject.loss(model, slice(None))
    scale = 1.0 if ctx.reduction == "sum" else 1.0 / max(items, 1)
    shares = [_norm(subject.reference_gradient(model, rows=p, reduction="sum")) * scale for p in parts]
    full_norm = _norm(expected_full)
    positive = [s for s in shares if s > 0]
    max_norm = 0.5 * (min(positive) if positive else full_norm)
    if not max_norm > 0:
        result.status = SKIPPED
        result.notes.append("the gradient is zero: there is nothing to clip")
        return result
    coef = min(1.0, max_norm / (full_norm + 1e-6))  # clip_grad_norm's rule
    expected = {name: g * coef for name, g in expected_full.items()}
    base = ctx.tolerance(len(parts))
    # the norm itself errs by at most the bound's own norm (triangle inequality), and so does coef, relatively
    relative = _norm({n: np.broadcast_to(b, expected_full[n].shape) for n, b in base.bounds.items()}) / full_norm
    tolerance = Tolerance({name: coef * base.bounds[name] + 2.0 * relative * np.abs(expected[name])
                           for name in expected},
                          f"the rounding bound times the clipping factor {coef:.3g}, plus the norm's own error "
                          f"(relative {relative:.2e}) on the clipped gradient; {base.why}")
    source = ctx.recipe.window(subject, model, parts, len(parts), max_norm=max_norm)
    ctx.recipe.clip(source, max_norm)
    result.compare(gradient_arrays(source, model), expected, tolerance,
                   f"split {sizes} clipped to max_norm={max_norm:.3g} (window norm {full_norm:.3g})", split=sizes)
    return result.settle(ctx.inexact())


def loss_scaling_is_invisible(ctx: CheckContext) -> PropertyResult:
    """A window accumulated under a loss scale of 2^8 (as fp16 training does) is bit-identical to
    the unscaled window: the seed and the unscale are powers of two."""
    result = PropertyResult("loss_scaling_is_invisible", "a loss-scaled window equals the unscaled one bit for bit")
    sizes = ctx.longest_split()
    parts = parts_of(sizes)
    model = ctx.subject.build()
    plain = gradient_arrays(ctx.recipe.window(ctx.subject, model, parts, len(parts)), model)
    scaled = ctx.recipe.window(ctx.subject, model, parts, len(parts),
                               loss_scaler=DynamicLossScaler(init_scale=_LOSS_SCALE))
    result.compare(gradient_arrays(scaled, model), plain,
                   _exact(plain, "bit-identical: multiplying by a power of two and by its inverse rounds nothing"),
                   f"split {sizes} under a loss scale of {_LOSS_SCALE:g}", split=sizes)
    return result.settle(ctx.inexact(random_only=True))


def resume_mid_window_equals_uninterrupted(ctx: CheckContext) -> PropertyResult:
    """Saving the accumulator and the model halfway through a window and resuming both into freshly
    built objects ends with the uninterrupted window's gradient, bit for bit."""
    result = PropertyResult("resume_mid_window_equals_uninterrupted",
                            "a window saved and resumed mid-way equals the uninterrupted window bit for bit")
    subject, recipe = ctx.subject, ctx.recipe
    sizes = ctx.longest_split()
    parts = parts_of(sizes)
    stop = max(1, len(parts) // 2)
    model = subject.build()
    whole = recipe.window(subject, model, parts, len(parts))
    if not isinstance(whole, Accumulator):
        result.status = SKIPPED
        result.notes.append(f"the recipe {recipe.name!r} keeps no Accumulator to save")
        return result
    uninterrupted = gradient_arrays(whole, model)
    acc = recipe.accumulator(subject, model, len(parts))
    recipe.window(subject, model, parts[:stop], len(parts), acc=acc)
    state, record = acc.state_dict(), model.to_record()
    fresh = subject.build().load_record(record)
    resumed = recipe.accumulator(subject, fresh, len(parts))
    resumed.load_state_dict(state)
    recipe.window(subject, fresh, parts[stop:], len(parts), acc=resumed)
    result.compare(gradient_arrays(resumed, fresh), uninterrupted,
                   _exact(uninterrupted, "bit-identical: the sums, counters and flags are saved exactly and the "
                                         "remaining micro-batches run the same arithmetic"),
                   f"split {sizes} saved after {stop} of {len(parts)} micro-batches", split=sizes)
    return result.settle(ctx.inexact(random_only=True))

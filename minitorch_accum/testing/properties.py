"""The equivalence properties a user's model gets for free, by name.

Each takes a ``CheckContext`` (the subject, the recipe under test, the splits) and returns a
``PropertyResult``; ``check_properties`` runs them on a model, the bug museum runs each of its
faulty recipes through them.

| name | claim |
| --- | --- |
| ``window_equals_full_batch`` | the window's gradient is the big batch's, any split, full or partial window |
| ``steps_equal_big_batch`` | k x b equals k*b after N optimizer steps (SGD, AdamW, a schedule, a short epoch) |
| ``clipping_uses_the_window_norm`` | the window is clipped by its own norm, not micro-batch by micro-batch |
| ``loss_scaling_is_invisible`` | a loss-scaled window is the unscaled one, bit for bit |
| ``resume_mid_window_equals_uninterrupted`` | saving and resuming mid-window changes no bit |
| ``data_parallel_equals_one_rank`` | R ranks x k equal one process with R*k micro-batches |
| ``item_count_matches_the_loss`` | ``loss_fn`` counts the items its summed loss sums (wrong alike on both sides) |

Models that cannot match the big batch by nature (training-mode BatchNorm, rows that interact,
a forward random beyond what the check can key to items) make a property *inconclusive*, with
the gap measured and the reason named; an inconclusive property fails the check unless the
caller allows it. Dropout is compared under masks that follow the items.
"""

from __future__ import annotations

from collections.abc import Callable

from minitorch_accum.testing.check_context import CheckContext
from minitorch_accum.testing.item_count import item_count_matches_the_loss
from minitorch_accum.testing.property_results import PropertyResult
from minitorch_accum.testing.training_properties import data_parallel_equals_one_rank, steps_equal_big_batch
from minitorch_accum.testing.window_properties import (
    clipping_uses_the_window_norm,
    loss_scaling_is_invisible,
    resume_mid_window_equals_uninterrupted,
    window_equals_full_batch,
)

__all__ = ["PROPERTIES", "property_named"]

Property = Callable[[CheckContext], PropertyResult]

PROPERTIES: dict[str, Property] = {
    "window_equals_full_batch": window_equals_full_batch,
    "steps_equal_big_batch": steps_equal_big_batch,
    "clipping_uses_the_window_norm": clipping_uses_the_window_norm,
    "loss_scaling_is_invisible": loss_scaling_is_invisible,
    "resume_mid_window_equals_uninterrupted": resume_mid_window_equals_uninterrupted,
    "data_parallel_equals_one_rank": data_parallel_equals_one_rank,
    "item_count_matches_the_loss": item_count_matches_the_loss,
}


def property_named(name: str) -> Property:
    """The property called ``name`` (a KeyError listing them otherwise)."""
    try:
        return PROPERTIES[name]
    except KeyError:
        raise KeyError(f"no equivalence property {name!r}; the properties are {', '.join(PROPERTIES)}") from None

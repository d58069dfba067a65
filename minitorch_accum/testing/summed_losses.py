"""The losses the bug museum and the false-alarm corpus check models with: summed over the
micro-batch's items, with the item count the window divides by."""

from __future__ import annotations

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn import functional as F

__all__ = ["shifted_cross_entropy", "summed_cross_entropy"]


def summed_cross_entropy(output: Tensor, targets: np.ndarray) -> tuple[Tensor, int]:
    """Cross-entropy summed over the targets, and their count."""
    return F.cross_entropy(output, targets, reduction="sum"), F.count_items(targets)


def shifted_cross_entropy(output: Tensor, labels: np.ndarray) -> tuple[Tensor, int]:
    """A causal LM's loss: position t predicts label t + 1, so position 0's label is never a target."""
    targets = labels[:, 1:]
    return F.cross_entropy(output[:, :-1], targets, reduction="sum"), F.count_items(targets)

"""What the op tests share: float64 leaves for gradcheck."""

from __future__ import annotations

import numpy as np

import minitorch_accum as mta


def leaf(values: np.ndarray) -> mta.Tensor:
    """A float64 CPU tensor that requires grad (what gradcheck needs)."""
    return mta.tensor(np.array(values, dtype=np.float64), dtype="float64", requires_grad=True)

"""Adding Neumaier (sum, compensation) pairs without losing the rounding error of the sum.

A compensated arena holds, per element, ``acc`` (the running sum) and ``comp`` (the
rounding errors it dropped). Two ranks' pairs combine as one more Neumaier step: the
rounding error of ``acc_a + acc_b`` is recovered exactly (TwoSum) and added to the
compensations. The result's ``acc + comp`` is then the exact sum to about eps^2, so
after the final fold it rounds to the same float64 (or float32) whatever the split of
the window over ranks and micro-batches. The step is symmetric in its two operands,
so the order in which MPI combines ranks does not change it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["add_pairs"]


def add_pairs(acc_in: Any, comp_in: Any, acc: Any, comp: Any) -> None:
    """(acc, comp) += (acc_in, comp_in), in place; NumPy or CuPy arrays of one dtype."""
    with np.errstate(all="ignore"):  # inf and nan propagate, as in the accumulation kernels
        total = acc + acc_in
        bigger = abs(acc) >= abs(acc_in)
        lost = _where(bigger, (acc - total) + acc_in, (acc_in - total) + acc)
        comp += comp_in
        comp += lost
        acc[...] = total


def _where(condition: Any, a: Any, b: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np.where(condition, a, b)
    import cupy

    return cupy.where(condition, a, b)

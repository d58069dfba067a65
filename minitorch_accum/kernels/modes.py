"""Accumulation modes, mirroring MtaAccumulateMode in csrc/accum_math.cuh."""

from __future__ import annotations

__all__ = ["ADD", "ADD_COMPENSATED", "COPY", "COPY_COMPENSATED", "is_compensated"]

ADD = 0  # acc += s * g
COPY = 1  # acc = s * g (first micro-batch of a window: no zeroing pass)
ADD_COMPENSATED = 2  # Neumaier: (acc, comp) += s * g
COPY_COMPENSATED = 3  # acc = s * g, comp = 0


def is_compensated(mode: int) -> bool:
    """Whether the mode keeps a compensation array beside the accumulator."""
    return mode in (ADD_COMPENSATED, COPY_COMPENSATED)

"""Accumulation modes, mirroring MtaAccumulateMode in csrc/accum_math.cuh."""

from __future__ import annotations

__all__ = [
    "ADD",
    "ADD_COMPENSATED",
    "ADD_STOCHASTIC",
    "COPY",
    "COPY_COMPENSATED",
    "COPY_STOCHASTIC",
    "is_compensated",
    "is_stochastic",
    "reads_acc",
]

ADD = 0  # acc += s * g
COPY = 1  # acc = s * g (first micro-batch of a window: no zeroing pass)
ADD_COMPENSATED = 2  # Neumaier: (acc, comp) += s * g
COPY_COMPENSATED = 3  # acc = s * g, comp = 0
ADD_STOCHASTIC = 4  # bfloat16 acc = SR(float(acc) + s * g), random bits from a Philox stream
COPY_STOCHASTIC = 5  # bfloat16 acc = SR(s * g)


def is_compensated(mode: int) -> bool:
    """Whether the mode keeps a compensation array beside the accumulator."""
    return mode in (ADD_COMPENSATED, COPY_COMPENSATED)


def is_stochastic(mode: int) -> bool:
    """Whether the mode rounds a bfloat16 accumulator stochastically (it takes a stream's key)."""
    return mode in (ADD_STOCHASTIC, COPY_STOCHASTIC)


def reads_acc(mode: int) -> bool:
    """Whether the mode adds to the accumulator (rather than writing it)."""
    return mode in (ADD, ADD_COMPENSATED, ADD_STOCHASTIC)

"""Accumulation modes, mirroring MtaAccumulateMode in csrc/accum_math.cuh."""

from __future__ import annotations

__all__ = ["ADD", "ADD_COMPENSATED", "COPY", "COPY_COMPENSATED", "KERNEL_NAMES", "is_compensated"]

ADD = 0  # acc += s * g
COPY = 1  # acc = s * g (first micro-batch of a window: no zeroing pass)
ADD_COMPENSATED = 2  # Neumaier: (acc, comp) += s * g
COPY_COMPENSATED = 3  # acc = s * g, comp = 0

# the public kernel name of each mode (and the stem of its CUDA kernel names)
KERNEL_NAMES: dict[int, str] = {
    ADD: "add_scale",
    COPY: "copy_scale",
    ADD_COMPENSATED: "add_scale_compensated",
    COPY_COMPENSATED: "copy_scale_compensated",
}


def is_compensated(mode: int) -> bool:
    return mode in (ADD_COMPENSATED, COPY_COMPENSATED)

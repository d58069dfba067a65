"""Cutting the gradient arena into buckets: the pieces one collective call reduces.

Buckets are views of the flat buffers, taken from the end (the last parameters' gradients
are the first backward finishes, which is what lets a bucket's reduction start early), a
small first bucket then full-size ones (as PyTorch DDP does), every edge on a multiple of
``world_size`` cache lines so each bucket splits into aligned, equal shards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from minitorch_accum.accum import GradArena
from minitorch_accum.accum.arena import ALIGNMENT_BYTES

__all__ = ["DEFAULT_BUCKET_BYTES", "DEFAULT_FIRST_BUCKET_BYTES", "Bucket", "plan_buckets"]

DEFAULT_BUCKET_BYTES = 25 << 20
DEFAULT_FIRST_BUCKET_BYTES = 1 << 20


@dataclass(frozen=True)
class Bucket:
    """Elements [start, stop) of the flat buffer of ``dtype``, and the parameters in it."""

    index: int
    dtype: np.dtype
    start: int
    stop: int
    params: tuple[str, ...]

    @property
    def elements(self) -> int:
        return self.stop - self.start

    @property
    def nbytes(self) -> int:
        return self.elements * self.dtype.itemsize

    def of(self, buffers: dict[np.dtype, Any]) -> Any:
        """This bucket's view of a buffer set with the arena's layout (the arena or its twin)."""
        return buffers[self.dtype][self.start:self.stop]


def plan_buckets(arena: GradArena, world_size: int, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                 first_bucket_bytes: int = DEFAULT_FIRST_BUCKET_BYTES) -> list[Bucket]:
    """Buckets covering every flat buffer of ``arena`` (padding included), last parameters first."""
    if bucket_bytes <= 0 or first_bucket_bytes <= 0:
        raise ValueError(f"bucket sizes must be positive, got {bucket_bytes} and {first_bucket_bytes}")
    spans = [(arena.span(p), name) for name, p in zip(arena.names, arena.params, strict=True)]
    buckets: list[Bucket] = []
    for dtype, buffer in arena.buffers.items():
        unit = world_size * (ALIGNMENT_BYTES // dtype.itemsize)
        if buffer.size % unit:
            raise ValueError(f"the arena's {dtype.name} buffer ({buffer.size} elements) does not split into "
                             f"{world_size} aligned shards: build it with shards={world_size}")
        stop = int(buffer.size)
        limit = first_bucket_bytes
        while stop > 0:
            elements = max(unit, limit // dtype.itemsize // unit * unit)
            start = max(0, stop - elements)
            names = tuple(name for (d, offset, size), name in reversed(spans)
                          if d == dtype and offset < stop and offset + size > start)
            buckets.append(Bucket(len(buckets), dtype, start, stop, names))
            stop, limit = start, bucket_bytes
    return buckets

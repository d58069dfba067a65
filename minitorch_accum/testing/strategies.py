"""Hypothesis strategies for shapes and tensors, for the library's tests and for users'.

Needs the ``test`` extra (hypothesis).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = ["arrays", "axes_for", "broadcastable_shapes", "matmul_shapes", "shapes"]


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4) -> st.SearchStrategy:
    """Array shapes, size-1 axes included."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


@st.composite
def broadcastable_shapes(draw: Any, max_dims: int = 3, max_side: int = 4) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two shapes that broadcast together (one may have fewer axes or size-1 axes)."""
    result = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=max_dims,
                                                     min_side=1, max_side=max_side))
    return result.input_shapes


@st.composite
def matmul_shapes(draw: Any, max_batch_dims: int = 2, max_side: int = 4) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes (..., n, k) and (..., k, m) whose batch axes broadcast (or a 2-D right operand)."""
    n, k, m = (draw(st.integers(1, max_side)) for _ in range(3))
    batch_a, batch_b = draw(broadcastable_shapes(max_dims=max_batch_dims, max_side=3))
    if draw(st.booleans()):
        batch_b = ()
    return batch_a + (n, k), batch_b + (k, m)


def arrays(shape: tuple[int, ...], low: float = -2.0, high: float = 2.0, dtype: Any = np.float64) -> st.SearchStrategy:
    """Arrays of finite values in [low, high]."""
    return hnp.arrays(dtype, shape, elements=st.floats(low, high, allow_nan=False, allow_infinity=False, width=64))


@st.composite
def axes_for(draw: Any, shape: tuple[int, ...]) -> int | tuple[int, ...] | None:
    """An ``axis`` argument for ``shape``: None (all axes), one axis, or distinct axes, negative ones included."""
    if not shape or draw(st.booleans()):
        return None
    axes = draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=len(shape),
                         unique_by=lambda a: a % len(shape)))
    return axes[0] if len(axes) == 1 else tuple(axes)

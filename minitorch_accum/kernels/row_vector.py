"""A row vector broadcast over a matrix's rows, and its gradient, on the native pool (CPU only):
a Linear's bias added to its product, and the bias's gradient summed over the rows.

Both give NumPy's bits (csrc/native/row_vector_cpu.cpp says why they exist: NumPy's broadcast
loop costs ~40 ns a row). Without the native module ``row_vector_available()`` is False and the
backend uses NumPy.
"""

from __future__ import annotations

import numpy as np

from minitorch_accum.kernels.dispatch import native, native_available

__all__ = ["add_row_vector", "row_vector_available", "sum_rows"]


def row_vector_available() -> bool:
    """Whether the native module has these kernels."""
    return native_available() and hasattr(native(), "add_row_vector")


def add_row_vector(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """x + v for a C-contiguous 2-D x and a vector v of its columns (float32 or float64), as a new
    array: one rounding per element, NumPy's bits (8 B/elem fp32)."""
    out = np.empty(x.shape, dtype=x.dtype)
    native().add_row_vector(x, v, out)
    return out


def sum_rows(g: np.ndarray) -> np.ndarray:
    """g.sum(axis=0) of a C-contiguous 2-D g with at least one row (float32 or float64): the rows
    added in order, NumPy's bits for two columns or more (4 B/elem fp32)."""
    out = np.empty(g.shape[1], dtype=g.dtype)
    native().sum_rows(g, out)
    return out

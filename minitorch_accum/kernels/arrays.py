"""The array types the kernels take, for type hints.

A kernel called on the host takes NumPy arrays, on a GPU CuPy arrays. CuPy ships no type
information, so an array that may be either is ``Any``: this is the one place that says so.
A host array (the reference, the emulator, the native module) is a NumPy array of any dtype.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy.typing as npt

__all__ = ["Array", "HostArray"]

Array: TypeAlias = Any  # a numpy.ndarray or a cupy.ndarray
HostArray: TypeAlias = npt.NDArray[Any]

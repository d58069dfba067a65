"""The floating-point dtypes a tensor may hold, and how names map to NumPy dtypes.

bfloat16 comes from ml_dtypes on the CPU (NumPy has none); CuPy accepts the same
dtype object where it supports it. The dtype objects are the kernels' own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.kernels.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, LOW_PRECISION

__all__ = [
    "FLOAT_DTYPES",
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "is_low_precision",
    "resolve_dtype",
]

float32, float64, float16, bfloat16 = FLOAT32, FLOAT64, FLOAT16, BFLOAT16

FLOAT_DTYPES: dict[str, np.dtype] = {
    "float32": float32,
    "float64": float64,
    "float16": float16,
    "bfloat16": bfloat16,
}
_ALIASES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "half": "float16",
            "bf16": "bfloat16", "float": "float32", "double": "float64"}


def resolve_dtype(dtype: Any) -> np.dtype:
    """Return the NumPy dtype for a name, NumPy dtype or scalar type; reject non-float dtypes."""
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in FLOAT_DTYPES:
            return FLOAT_DTYPES[name]
        raise TypeError(
            f"unsupported dtype {dtype!r}: expected one of {', '.join(FLOAT_DTYPES)}"
        )
    try:
        resolved = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(
            f"unsupported dtype {dtype!r}: expected one of {', '.join(FLOAT_DTYPES)}"
        ) from exc
    if resolved.name not in FLOAT_DTYPES:
        raise TypeError(
            f"unsupported dtype {resolved.name}: expected one of {', '.join(FLOAT_DTYPES)}"
        )
    return FLOAT_DTYPES[resolved.name]


def is_low_precision(dtype: np.dtype) -> bool:
    """True for the 16-bit float types whose gradients are accumulated in float32."""
    return dtype in LOW_PRECISION

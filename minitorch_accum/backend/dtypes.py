"""The dtypes a tensor may hold, how names map to NumPy dtypes, and the default float dtype.

Parameters and anything that takes a gradient are floating point: float32, float64,
float16 or bfloat16 (bfloat16 comes from ml_dtypes on the CPU; CuPy accepts the same
dtype object where it supports it; the float dtype objects are the kernels' own).
Integer and bool tensors exist for ids, targets, masks and indices.

The default float dtype (float32 unless ``set_default_dtype`` says otherwise) is
what ``tensor()`` gives Python floats, what ``zeros()``/``randn()`` make, and what
layers are built in when no ``dtype`` is given, as in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.kernels.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, LOW_PRECISION

__all__ = [
    "FLOAT_DTYPES",
    "TENSOR_DTYPES",
    "bfloat16",
    "bool_",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_float_dtype",
    "is_low_precision",
    "resolve_dtype",
    "resolve_tensor_dtype",
    "set_default_dtype",
    "uint8",
]

float32, float64, float16, bfloat16 = FLOAT32, FLOAT64, FLOAT16, BFLOAT16
int64, int32, int16, int8 = (np.dtype(t) for t in (np.int64, np.int32, np.int16, np.int8))
uint8 = np.dtype(np.uint8)
bool_ = np.dtype(np.bool_)

FLOAT_DTYPES: dict[str, np.dtype] = {
    "float32": float32,
    "float64": float64,
    "float16": float16,
    "bfloat16": bfloat16,
}
TENSOR_DTYPES: dict[str, np.dtype] = {
    **FLOAT_DTYPES,
    **{d.name: d for d in (int64, int32, int16, int8, uint8, bool_)},
}
_ALIASES = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "half": "float16",
            "bf16": "bfloat16", "float": "float32", "double": "float64", "long": "int64", "int": "int32"}

_default_dtype = float32


def set_default_dtype(dtype: Any) -> None:
    """Make ``dtype`` (a float dtype) the default of ``tensor()``, ``zeros()``, ``randn()`` and layers."""
    global _default_dtype
    _default_dtype = resolve_dtype(dtype)


def get_default_dtype() -> np.dtype:
    """The float dtype used where none is given (float32 unless ``set_default_dtype`` changed it)."""
    return _default_dtype


def _lookup(dtype: Any, table: dict[str, np.dtype]) -> np.dtype:
    expected = ", ".join(table)
    if dtype is None:
        return _default_dtype
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in table:
            return table[name]
        raise TypeError(f"unsupported dtype {dtype!r}: expected one of {expected}")
    try:
        resolved = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"unsupported dtype {dtype!r}: expected one of {expected}") from exc
    if resolved.name not in table:
        raise TypeError(f"unsupported dtype {resolved.name}: expected one of {expected}")
    return table[resolved.name]


def resolve_dtype(dtype: Any) -> np.dtype:
    """The NumPy dtype for a float dtype's name, NumPy dtype or scalar type (None: the default);
    non-float dtypes are rejected (parameters, gradients and accumulators are floats)."""
    return _lookup(dtype, FLOAT_DTYPES)


def resolve_tensor_dtype(dtype: Any) -> np.dtype:
    """Like ``resolve_dtype``, but integer and bool dtypes (ids, targets, masks) are accepted too."""
    return _lookup(dtype, TENSOR_DTYPES)


def is_float_dtype(dtype: np.dtype) -> bool:
    """True for the dtypes that can take a gradient."""
    return dtype.kind == "f" or dtype == bfloat16


def is_low_precision(dtype: np.dtype) -> bool:
    """True for the 16-bit float types whose gradients are accumulated in float32."""
    return dtype in LOW_PRECISION

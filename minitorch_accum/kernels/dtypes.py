"""The dtypes the kernels accept, and the codes the CUDA sources give them.

The codes mirror ``MtaKind`` and ``MtaDtype`` in csrc/multi_tensor.cuh; a test
compares them with the values the native module reports.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "ACCUMULATE_KINDS",
    "BFLOAT16",
    "BFLOAT16_KINDS",
    "FLOAT16",
    "FLOAT32",
    "FLOAT64",
    "LOW_PRECISION",
    "NORM_DTYPES",
    "OPTIMIZER_DTYPES",
    "SHORT_NAMES",
    "SUPPORTED_PAIRS_TEXT",
    "SUPPORTED_WITH_BFLOAT16_TEXT",
]

FLOAT16 = np.dtype(np.float16)
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)

# (accumulator dtype, gradient dtype) -> MtaKind
ACCUMULATE_KINDS: dict[tuple[np.dtype, np.dtype], int] = {
    (FLOAT32, FLOAT32): 0,
    (FLOAT32, FLOAT16): 1,
    (FLOAT32, BFLOAT16): 2,
    (FLOAT64, FLOAT64): 3,
    (FLOAT64, FLOAT32): 4,
}

# (bfloat16 accumulator, gradient dtype) -> MtaKind: summed in float32, each sum rounded back
# (to nearest by add_scale, copy_scale and cast_add_scale, stochastically by the *_stochastic
# kernels); the compensated kernels take none of them
BFLOAT16_KINDS: dict[tuple[np.dtype, np.dtype], int] = {
    (BFLOAT16, FLOAT32): 5,
    (BFLOAT16, FLOAT16): 6,
    (BFLOAT16, BFLOAT16): 7,
}

# gradient dtypes that the cast kernel widens into a float32 (or bfloat16) accumulator
LOW_PRECISION: tuple[np.dtype, ...] = (FLOAT16, BFLOAT16)

# array dtype -> MtaDtype, for the L2 norm
NORM_DTYPES: dict[np.dtype, int] = {FLOAT32: 0, FLOAT16: 1, BFLOAT16: 2, FLOAT64: 3}

OPTIMIZER_DTYPES: tuple[np.dtype, ...] = (FLOAT32, FLOAT64)

# the suffixes of the CUDA kernel names: mta_add_scale_f32_bf16
SHORT_NAMES: dict[np.dtype, str] = {FLOAT32: "f32", FLOAT16: "f16", BFLOAT16: "bf16", FLOAT64: "f64"}

SUPPORTED_PAIRS_TEXT = (
    "(float32, float32), (float32, float16), (float32, bfloat16), (float64, float64), (float64, float32)"
)
SUPPORTED_WITH_BFLOAT16_TEXT = (
    SUPPORTED_PAIRS_TEXT + ", (bfloat16, float32), (bfloat16, float16), (bfloat16, bfloat16)"
)

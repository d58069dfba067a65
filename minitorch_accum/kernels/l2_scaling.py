"""When an fp64 sum of squares needs scaling, and by how much (LAPACK's nrm2 concern).

Every path sums squares in fp64. For fp32, fp16 and bf16 values that is
always safe: a square lies between 2^-298 and 2^256. For fp64 values a square
overflows above ~1.3e154 and underflows below ~1.5e-154, so the norm of a
finite array could come out inf or 0. Then a second pass takes the largest
magnitude m and sums the squares of x * 2^-e, with e = exponent of m (the
scaling is exact, and the largest term is in [1/4, 1)); the norm is the root
times 2^e. The native module mirrors these constants
(csrc/native/l2_norm_cpu.cpp).
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["MIN_SCALE_EXPONENT", "SAFE_MIN_SUM", "needs_scaling", "norm_from_sums", "scale_exponent"]

# A sum at or above this lost nothing that matters to underflow: a square that
# underflows is off by at most 2^-1075, so n of them move the sum by at most
# n * 2^-115 of itself (2^-65 for n = 2^50), far below fp64's own 2^-53.
SAFE_MIN_SUM = 2.0**-960
# 2^-e must stay a finite double (a max of 2^-1074 would otherwise ask for 2^1074).
MIN_SCALE_EXPONENT = -1000


def needs_scaling(total: float) -> bool:
    """Whether a plain fp64 sum of squares may have overflowed or lost bits to underflow."""
    return not math.isnan(total) and not SAFE_MIN_SUM <= total < math.inf


def scale_exponent(largest: float) -> int:
    """e such that largest * 2^-e lies in [1/2, 1) (clamped so 2^-e stays finite)."""
    return max(math.frexp(largest)[1], MIN_SCALE_EXPONENT)


def norm_from_sums(sums: Callable[[float], tuple[float, float]]) -> float:
    """The norm, from ``sums(scale)`` = (sum of (scale * x)^2, max |scale * x|) over every element.

    One call with scale 1 in the common case; a second, scaled one when needed.
    """
    total, largest = sums(1.0)
    if not needs_scaling(total):
        return math.sqrt(total)
    if largest == 0.0 or math.isinf(largest):
        return largest  # all zeros, or an inf among the values (a NaN made total NaN above)
    e = scale_exponent(largest)
    total, _ = sums(math.ldexp(1.0, -e))
    try:
        return math.ldexp(math.sqrt(total), e)
    except OverflowError:  # the norm itself exceeds the largest double (C's ldexp gives inf)
        return math.inf

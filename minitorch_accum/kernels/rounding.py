"""Rounding float32 to bfloat16, to nearest and stochastically, and the Philox4x32-10 stream of
random bits that stochastic rounding draws from: the NumPy twin of csrc/accum_math.cuh.

The reference path (``reference.py``) rounds with these functions, and every other path must give
the same bits, so each one repeats the header's integer operations exactly:

- ``round_nearest(x)``: ties to even, on bits; a NaN becomes ``(bits >> 16) | 0x40``;
- ``round_stochastic(x, r)``: ``(bits + r) >> 16`` with r uniform in [0, 2^16): the magnitude is
  rounded up with probability (discarded bits) / 2^16, the fraction of a unit it discards, so the
  expected result is x itself;
- ``philox4x32_10(counters, key)``: Random123's Philox4x32 with 10 rounds;
- ``rounding_bits(seed, window, micro_batch, elements)``: the 16 bits of each stream index (an
  element's index in the arena): block e // 8 at counter (block low word, block high word,
  micro_batch, window), key (seed low word, seed high word), lane e % 8 the low (even lane) or
  high (odd lane) half of word (e % 8) // 2.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["PHILOX_ROUNDS", "philox4x32_10", "round_nearest", "round_stochastic", "rounding_bits"]

PHILOX_ROUNDS = 10
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)  # the round's multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # the key's increments (Weyl sequence)
_LOW = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)

U16 = npt.NDArray[np.uint16]
U32 = npt.NDArray[np.uint32]


def philox4x32_10(counters: npt.ArrayLike, key: tuple[int, int]) -> U32:
    """Philox4x32-10 of each row of ``counters`` (shape (n, 4), 32-bit words) under ``key`` (two
    32-bit words): an array of shape (n, 4) of uint32. Counter 0, key 0 gives 6627e8d5 e169c58d
    bc57ac4c 9b00dbd8 (Random123's known answer)."""
    c = np.array(counters, dtype=np.uint64).reshape(-1, 4)  # uint64 so the products are exact
    c0, c1, c2, c3 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    for _ in range(PHILOX_ROUNDS):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = ((p1 >> _SHIFT) ^ c1 ^ np.uint64(k0), p1 & _LOW,
                          (p0 >> _SHIFT) ^ c3 ^ np.uint64(k1), p0 & _LOW)
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.uint32)


def rounding_bits(seed: int, window: int, micro_batch: int, first: int, count: int) -> U16:
    """The 16 random bits of stream indices ``first`` ... ``first + count - 1``, as the kernels draw
    them for an array whose element 0 is stream index ``first``."""
    if count <= 0:
        return np.zeros(0, dtype=np.uint16)
    lead = first & 7
    blocks = np.uint64(first >> 3) + np.arange((lead + count + 7) // 8, dtype=np.uint64)
    counters = np.empty((blocks.size, 4), dtype=np.uint64)
    counters[:, 0], counters[:, 1] = blocks & _LOW, blocks >> _SHIFT
    counters[:, 2], counters[:, 3] = micro_batch, window
    words = philox4x32_10(counters, (seed & 0xFFFFFFFF, seed >> 32))
    # little-endian: each word's low half is the even lane, its high half the odd one
    halves = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=2).astype(np.uint16).reshape(-1)
    return halves[lead:lead + count]


def _bits(x: npt.ArrayLike) -> U32:
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def _nan_or(bits: U32, rounded: U32) -> U16:
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x40)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def round_nearest(x: npt.ArrayLike) -> U16:
    """The bfloat16 bits of float32 ``x`` rounded to nearest, ties to even."""
    u = _bits(x)
    with np.errstate(over="ignore"):  # uint32 wraps only for NaN, which is replaced
        rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return _nan_or(u, rounded)


def round_stochastic(x: npt.ArrayLike, r: npt.ArrayLike) -> U16:
    """The bfloat16 bits of float32 ``x`` rounded stochastically with the 16 random bits ``r``."""
    u = _bits(x)
    with np.errstate(over="ignore"):
        rounded = (u + (np.asarray(r).astype(np.uint32) & np.uint32(0xFFFF))) >> np.uint32(16)
    return _nan_or(u, rounded)

"""Strategies and helpers shared by the kernel tests.

Array data comes from a seeded NumPy generator (hypothesis draws the seed, the
size, the alignment offset, the dtypes and the scale), so large arrays cost
hypothesis nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from minitorch_accum.kernels import use_path
from minitorch_accum.kernels.dtypes import ACCUMULATE_KINDS
from minitorch_accum.kernels.launch import forced_shape

CPU_PATHS = ("reference", "native", "emulated")

# around the 4/8-element vector packs, the 512-thread block and the 65536 chunk
BOUNDARY_SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 511, 513, 2047, 2049, 65535, 65536, 65537]

sizes = st.one_of(st.sampled_from(BOUNDARY_SIZES), st.integers(0, 2000).map(lambda n: 2 * n + 1))
offsets = st.integers(0, 3)  # elements: 1..3 break 16-byte alignment, refusing the vector path
seeds = st.integers(0, 2**32 - 1)
scales = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, -2.5, 0.1, 1e-30, -1e-30, 3.0e5]),
    st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False),
)
pairs = st.sampled_from(sorted(ACCUMULATE_KINDS, key=str))


def array(rng: np.random.Generator, n: int, dtype: np.dtype, offset: int = 0, magnitude: float = 1.0) -> np.ndarray:
    """A C-contiguous array of n values that starts ``offset`` elements into its buffer."""
    buffer = np.empty(n + offset + 4, dtype=dtype)
    out = buffer[offset : offset + n]
    values = rng.standard_normal(n) * magnitude * np.exp(rng.uniform(-4, 4, n))
    out[...] = values.astype(dtype)
    return out


def with_nonfinite(rng: np.random.Generator, x: np.ndarray, count: int = 1) -> np.ndarray:
    for _ in range(count):
        x[rng.integers(0, x.size)] = rng.choice([np.inf, -np.inf, np.nan])
    return x


def copies(*arrays: np.ndarray | None, offset: int = 0) -> list[np.ndarray | None]:
    """Copies that keep each array's alignment offset (so both runs take the same code path)."""
    out: list[np.ndarray | None] = []
    for a in arrays:
        if a is None:
            out.append(None)
            continue
        buffer = np.empty(a.size + offset + 4, dtype=a.dtype)
        c = buffer[offset : offset + a.size].reshape(a.shape)
        c[...] = a
        out.append(c)
    return out


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Equal bit for bit, except that any NaN matches any NaN (payloads are not specified)."""
    a = np.asarray(actual).reshape(-1)
    e = np.asarray(expected).reshape(-1)
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != {e.dtype}"
    assert a.shape == e.shape, f"{what}: shape {a.shape} != {e.shape}"
    with np.errstate(invalid="ignore"):  # widening a signaling NaN is "invalid" to NumPy
        wide_a = a.astype(np.float64)
        wide_e = e.astype(np.float64)
    nan_a, nan_e = np.isnan(wide_a), np.isnan(wide_e)
    bad = np.flatnonzero(nan_a != nan_e)
    assert bad.size == 0, f"{what}: NaN at {bad[:5]} differs: {a[bad[:5]]} vs {e[bad[:5]]}"
    unsigned = np.dtype(f"u{a.dtype.itemsize}")
    differ = (a.view(unsigned) != e.view(unsigned)) & ~nan_a
    bad = np.flatnonzero(differ)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {a.size} elements differ, first at {bad[:5]}: {a[bad[:5]]!r} vs {e[bad[:5]]!r}"
    )


@contextmanager
def on_path(path: str, grid: int | None = None, block: int | None = None) -> Iterator[None]:
    """Run kernels on a CPU path (optionally with a forced emulated launch shape)."""
    with use_path(path), forced_shape(grid=grid, block=block):
        yield


def reference_step(kernel: str, *arrays: np.ndarray | None, **settings: object) -> None:
    """An optimizer step on the NumPy reference, called with the public face's keyword
    arguments (the reference module itself takes the native module's scalars object)."""
    with use_path("reference"):
        getattr(K, kernel)(*arrays, **settings)

"""The float32 GEMM of our own (csrc/native/sgemm_cpu.cpp): every element summed in the one order
its comment defines (blocks of 256 k, each an FMA chain from +0, the blocks' sums added in order,
then alpha and beta), so the same bits under AVX-512, AVX2 and the scalar chain, at any thread
count and under either OpenBLAS kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.backend.blas import native_gemm

pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module")

BLOCK = 256


def _round_to_float32(value: Fraction) -> np.float32:
    """The float32 nearest to an exact rational, ties to even (one rounding, not float64's then float32's)."""
    guess = np.float32(float(value))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - value),
                                          int(np.array(c).view(np.uint32)) & 1))
    return np.float32(best)


def _fma(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    return _round_to_float32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def _defined_order(op_a: np.ndarray, op_b: np.ndarray, c: np.ndarray, alpha: float, beta: float,
                   bias: np.ndarray | None = None) -> np.ndarray:
    """The kernel's documented sum, element by element, every step rounded once to float32 (the
    bias row, when given, added last)."""
    m, k = op_a.shape
    n = op_b.shape[1]
    alpha32, beta32 = np.float32(alpha), np.float32(beta)
    out = np.empty((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            total = None
            for start in range(0, k, BLOCK):
                block = np.float32(0.0)
                for p in range(start, min(k, start + BLOCK)):
                    block = _fma(op_a[i, p], op_b[p, j], block)
                total = block if total is None else np.float32(total + block)
            total = np.float32(0.0) if total is None else total
            t = total if alpha32 == 1 else np.float32(alpha32 * total)
            if beta32 == 0:
                out[i, j] = t
            elif beta32 == 1:
                out[i, j] = np.float32(c[i, j] + t)
            else:
                out[i, j] = np.float32(np.float32(beta32 * c[i, j]) + t)
            if bias is not None:
                out[i, j] = np.float32(out[i, j] + bias[j])
    return out


@pytest.mark.parametrize(("m", "k", "n", "trans_a", "trans_b", "alpha", "beta"), [
    (3, 600, 5, False, False, 1.0, 0.0),   # three blocks of k, the last short
    (2, 600, 3, True, True, 0.5, 1.0),     # a weight gradient's second write, both operands transposed
    (15, 40, 33, False, True, 1.0, -0.75),  # a 14-row tile and one more row; a panel and one column
    (1, 257, 17, True, False, -2.0, 1.0),
    (4, 0, 3, False, False, 1.0, 0.5),      # no k: beta * out
    (3, 300, 48, False, False, 1.0, 1.0),   # b read in place: a panel of 32 and one of 16
    (2, 40, 16, True, False, 0.25, 0.0),
])
def test_every_element_is_summed_in_the_documented_order(m, k, n, trans_a, trans_b, alpha, beta) -> None:
    rng = np.random.default_rng(m * 1000 + k + n)
    # values of many magnitudes, so that another order or a fused last step rounds otherwise
    a = (rng.standard_normal((k, m) if trans_a else (m, k)) * 2.0 ** rng.integers(-8, 8, (k, m) if trans_a else (m, k)))
    b = rng.standard_normal((n, k) if trans_b else (k, n))
    a, b = a.astype(np.float32), b.astype(np.float32)
    out = rng.standard_normal((m, n)).astype(np.float32)
    expected = _defined_order(a.T if trans_a else a, b.T if trans_b else b, out, alpha, beta)
    K.gemm(out, a, trans_a, b, trans_b, alpha, beta)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize(("m", "k", "n", "trans_a", "trans_b", "alpha", "beta"), [
    (15, 40, 33, False, False, 1.0, 0.0),   # a Linear's forward: a tile and a row more, a panel and a column
    (3, 300, 48, False, False, 1.0, 0.0),   # b read in place: a panel of 32 and one of 16, two blocks of k
    (5, 20, 7, True, True, -0.5, 1.0),      # alpha and beta first, the bias last
    (4, 0, 3, False, False, 1.0, 0.0),      # no k: the bias alone
])
def test_a_bias_row_is_added_last_to_every_row(m, k, n, trans_a, trans_b, alpha, beta) -> None:
    rng = np.random.default_rng(m * 100 + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    # a bias of other magnitudes than the product's, so that adding it anywhere but last rounds otherwise
    bias = (rng.standard_normal(n) * 2.0 ** rng.integers(-12, 12, n)).astype(np.float32)
    out = rng.standard_normal((m, n)).astype(np.float32)
    expected = _defined_order(a.T if trans_a else a, b.T if trans_b else b, out, alpha, beta, bias)
    K.gemm(out, a, trans_a, b, trans_b, alpha, beta, bias=bias)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))


def test_a_bias_row_is_refused_where_it_cannot_be_added() -> None:
    a, b = np.ones((3, 2), np.float32), np.ones((2, 4), np.float32)
    out = np.empty((3, 4), np.float32)
    with pytest.raises(TypeError, match=r"bias row needs a float32 product.*float64"):
        K.gemm(np.empty((3, 4)), a.astype(np.float64), False, b.astype(np.float64), False, 1.0, 0.0,
               bias=np.ones(4))
    with pytest.raises(TypeError, match=r"bias \(shape \(4,\), float64\)"):
        K.gemm(out, a, False, b, False, 1.0, 0.0, bias=np.ones(4))
    with pytest.raises(ValueError, match=r"bias \(shape \(5,\), float32\) must be one row of out \(shape \(3, 4\)"):
        K.gemm(out, a, False, b, False, 1.0, 0.0, bias=np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"must be one row"):
        K.gemm(out, a, False, b, False, 1.0, 0.0, bias=np.ones((1, 4), np.float32))
    with pytest.raises(ValueError, match=r"bias"):
        K.gemm(out, a, False, b, False, 1.0, 0.0, bias=np.ones(8, np.float32)[::2])  # not contiguous
    with pytest.raises(ValueError, match=r"overlap|share"):
        K.gemm(out, a, False, b, False, 1.0, 0.0, bias=out[0])  # the bias is out's first row
    out[...] = 7.0
    K.gemm(out, a, False, b, False, 1.0, 0.0, bias=None)  # none: the plain product
    np.testing.assert_array_equal(out, np.full((3, 4), 2.0, np.float32))


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("m", "k", "n", "trans_b"), [
    (130, 300, 128, False),  # rows 128 floats apart or more and 4 panels: x^T is copied tile by tile
    (200, 600, 160, False),  # a second block of rows, tiles of 14 and a tail of 4, three blocks of k
    (171, 257, 130, True),   # a tail of one row, a last panel of 2 columns, b packed by gathers too
])
def test_a_packed_transposed_a_gives_the_bits_of_the_same_product_read_in_place(m, k, n, trans_b, threads) -> None:
    rng = np.random.default_rng(m + k + n)
    a = (rng.standard_normal((k, m)) * 2.0 ** rng.integers(-6, 6, (k, m))).astype(np.float32)  # op(A) = a^T
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    start = rng.standard_normal((m, n)).astype(np.float32)
    K.set_native_threads(threads)
    try:
        for alpha, beta in ((1.0, 0.0), (1.0, 1.0), (-0.5, 0.25)):
            packed, in_place = start.copy(), start.copy()
            K.gemm(packed, a, True, b, trans_b, alpha, beta)
            K.gemm(in_place, np.ascontiguousarray(a.T), False, b, trans_b, alpha, beta)  # op(A) row-major
            np.testing.assert_array_equal(packed.view(np.uint32), in_place.view(np.uint32))
    finally:
        K.set_native_threads(0)


def test_the_sums_are_as_accurate_as_their_block_bound() -> None:
    # |error| <= (256 + K/256 + 2) u sum |a||b| (u = 2^-24): the bound the blocks buy over one chain of K
    rng = np.random.default_rng(3)
    for k in (64, 1000, 4096):
        a = rng.standard_normal((k, 48)).astype(np.float32)
        b = rng.standard_normal((k, 40)).astype(np.float32)
        out = np.empty((48, 40), np.float32)
        K.gemm(out, a, True, b, False, 1.0, 0.0)
        exact = a.T.astype(np.float64) @ b.astype(np.float64)
        magnitude = np.abs(a.T).astype(np.float64) @ np.abs(b).astype(np.float64)
        bound = (BLOCK + -(-k // BLOCK) + 2) * 2.0 ** -24 * magnitude
        assert np.all(np.abs(out - exact) <= bound)


def test_a_product_writes_only_its_own_rows_of_a_larger_buffer() -> None:
    # the column tail of each row is a masked store: one that is not spills into the next row,
    # the last row's into the guard row below
    rng = np.random.default_rng(4)
    for n in (1, 15, 16, 17, 31, 32, 33, 48, 58):
        buffer = np.full((20, n), 7.0, np.float32)
        a, b = rng.standard_normal((15, 300), np.float32), rng.standard_normal((300, n), np.float32)
        out = buffer[2:17]
        for beta in (0.0, 1.0):
            before = out.copy()
            K.gemm(out, a, False, b, False, 1.0, beta)
            expected = a.astype(np.float64) @ b.astype(np.float64) + beta * before
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
        assert (buffer[:2] == 7.0).all() and (buffer[17:] == 7.0).all()


def test_beta_zero_ignores_what_out_held_and_non_finite_inputs_propagate() -> None:
    a = np.ones((3, 4), np.float32)
    b = np.ones((4, 2), np.float32)
    out = np.full((3, 2), np.nan, np.float32)
    K.gemm(out, a, False, b, False, 1.0, 0.0)
    np.testing.assert_array_equal(out, np.full((3, 2), 4.0, np.float32))
    out[1, 1] = np.nan
    K.gemm(out, a, False, b, False, 1.0, 1.0)
    assert np.isnan(out[1, 1]) and (out[np.arange(3) != 1] == 8.0).all()
    a[0, 2] = np.inf
    K.gemm(out, a, False, b, False, 1.0, 0.0)
    assert np.isinf(out[0]).all() and (out[1:] == 4.0).all()


_VARIANTS_PROGRAM = textwrap.dedent("""
    import hashlib
    import numpy as np
    import minitorch_accum.kernels as K
    from minitorch_accum.backend.blas import native_gemm
    native_gemm()
    # the models' products and their weight gradients; tails of every tile and panel; k in blocks
    shapes = [(1024, 64, 192), (1024, 64, 58), (64, 1024, 256), (768, 128, 65), (128, 768, 384),
              (169, 300, 33), (13, 513, 17), (1, 5, 1), (29, 256, 31), (7, 0, 9)]
    for threads in (1, 2, 3):
        K.set_native_threads(threads)
        digest = hashlib.sha256()
        rng = np.random.default_rng(0)
        for m, k, n in shapes:
            for trans_a in (False, True):
                for trans_b in (False, True):
                    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
                    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
                    out = rng.standard_normal((m, n)).astype(np.float32)
                    for alpha, beta in ((1.0, 0.0), (0.5, 1.0), (1.0, -0.25)):
                        K.gemm(out, a, trans_a, b, trans_b, alpha, beta)
                        digest.update(out.tobytes())
                    K.gemm_start(out, a, trans_a, b, trans_b, 1.0, 1.0)  # on a helper, from 2 threads
                    K.gemm_finish()
                    digest.update(out.tobytes())
                    bias = rng.standard_normal(n).astype(np.float32)  # a Linear's bias, in the epilogue
                    K.gemm(out, a, trans_a, b, trans_b, 1.0, 0.0, bias=bias)
                    digest.update(out.tobytes())
        # attention's stacks: q k^T of 16-wide heads sliced out of one qkv product, then p v
        qkv = rng.standard_normal((8, 32, 3, 4, 16)).astype(np.float32)
        q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
        scores = np.empty((8, 4, 32, 32), np.float32)
        mixed = np.empty((8, 4, 32, 16), np.float32)
        assert K.stacked_gemm(q, k.transpose(0, 1, 3, 2), scores) and K.stacked_gemm(scores, v, mixed)
        digest.update(scores.tobytes())
        digest.update(mixed.tobytes())
        print(threads, digest.hexdigest())
""")


def _digests(environment: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OPENBLAS_", "MTA_SIMD"))}
    env.update(environment, MTA_NUM_THREADS="3")
    done = subprocess.run([sys.executable, "-c", _VARIANTS_PROGRAM], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return dict(line.split() for line in done.stdout.splitlines())


def test_the_bits_are_the_same_for_every_instruction_set_thread_count_and_blas_kernel() -> None:
    runs = {
        "as-is": {},
        "avx2": {"MTA_SIMD": "avx2"},
        "scalar": {"MTA_SIMD": "baseline"},
        "Haswell": {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"},
    }
    seen = {name: _digests(environment) for name, environment in runs.items()}
    for name, digests in seen.items():
        assert set(digests) == {"1", "2", "3"}, name
    assert len({digest for digests in seen.values() for digest in digests.values()}) == 1, seen

"""The native pool's GEMM: out = alpha op(a) op(b) + beta out for every transpose; float32 on the
GEMM of our own (test_kernel_sgemm.py pins its order), float64 one single-threaded call of NumPy's
BLAS; NumPy's products within rounding, and the same bits whatever the thread count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minitorch_accum.kernels as K
from minitorch_accum.backend.blas import native_gemm

pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module and NumPy's OpenBLAS")


@pytest.fixture(params=[1, 2])
def threads(request):
    K.set_native_threads(request.param)
    yield request.param
    K.set_native_threads(0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("shape", [(1024, 64, 192), (64, 1024, 256), (3, 5, 7), (300, 17, 1000)])
def test_gemm_equals_numpy_for_every_transpose_and_thread_count(threads, dtype, trans_a, trans_b, shape) -> None:
    m, k, n = shape
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    out = rng.standard_normal((m, n)).astype(dtype)
    before = out.copy()
    K.gemm(out, a, trans_a, b, trans_b, 0.5, 1.0)
    expected = 0.5 * ((a.T if trans_a else a) @ (b.T if trans_b else b)) + before
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance * np.sqrt(k))


def test_two_threads_write_every_block_of_a_large_product() -> None:
    # a tall product is cut into blocks of rows, a short wide one (64 rows) into groups of columns
    rng = np.random.default_rng(1)
    for m, k, n in ((2048, 64, 64), (64, 64, 2048)):
        a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
        out = np.full((m, n), np.nan, np.float32)
        K.set_native_threads(2)
        try:
            K.gemm(out, a, False, b, False, 1.0, 0.0)
        finally:
            K.set_native_threads(0)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)


_BITS_PROGRAM = textwrap.dedent("""
    import hashlib, sys
    import numpy as np
    import minitorch_accum.kernels as K
    from minitorch_accum.backend.blas import native_gemm
    from threadpoolctl import threadpool_limits
    native_gemm(); threadpool_limits(1, "blas")
    # the models' products (char transformer at b = 32 and 16, nanoGPT, their weight gradients),
    # wide and odd ones; the 512-row ones are where a cut of the rows changed bits under Haswell
    shapes = [(1024, 64, 192), (1024, 64, 65), (1024, 256, 64), (64, 1024, 192), (256, 1024, 64),
              (768, 128, 384), (128, 768, 512), (300, 17, 1000), (1000, 40, 300), (2048, 64, 64),
              (512, 64, 192), (512, 64, 256), (512, 256, 64), (256, 512, 64)]
    for threads in (1, 2, 3, 4):
        K.set_native_threads(threads)
        digest = hashlib.sha256()
        for dtype in (np.float32, np.float64):
            rng = np.random.default_rng(0)
            for m, k, n in shapes:
                for trans_a in (False, True):
                    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
                    b = rng.standard_normal((k, n)).astype(dtype)
                    out = rng.standard_normal((m, n)).astype(dtype)
                    K.gemm(out, a, trans_a, b, False, 0.5, 1.0)  # a weight gradient's second write
                    digest.update(out.tobytes())
                    K.gemm(out, a, trans_a, b, False, 1.0, 0.0)  # a forward product
                    digest.update(out.tobytes())
                    # the same product in the background (from 2 threads on), while the caller runs another
                    K.gemm_start(out, a, trans_a, b, False, 1.0, 0.0)
                    other = np.empty((m, n), dtype)
                    K.gemm(other, a, trans_a, b, False, 1.0, 0.0)
                    K.gemm_finish()
                    digest.update(other.tobytes())
                    digest.update(out.tobytes())
        print(threads, digest.hexdigest())
""")


@pytest.mark.parametrize("coretype", [None, "Haswell"], ids=["as-is", "Haswell"])
def test_the_bits_do_not_depend_on_the_thread_count(coretype: str | None) -> None:
    # Each run in a process of its own: OpenBLAS reads OPENBLAS_CORETYPE when it loads. "Haswell" is
    # the kernel the AMD machines' environment picks; its float32 kernel takes 24 rows at a time.
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENBLAS_")}
    if coretype is not None:
        env.update(OPENBLAS_CORETYPE=coretype, OPENBLAS_L2_SIZE="1048576")
    env["MTA_NUM_THREADS"] = "4"
    done = subprocess.run([sys.executable, "-c", _BITS_PROGRAM], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    digests = dict(line.split() for line in done.stdout.splitlines())
    assert set(digests) == {"1", "2", "3", "4"}
    assert len(set(digests.values())) == 1, f"threads give other bits: {digests}"


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda: K.gemm(np.zeros((2, 3)), np.zeros((2, 4)), False, np.zeros((4, 3), np.float32), False, 1, 0), TypeError,
     "gemm: b (shape (4, 3), float32) must have the dtype of out (shape (2, 3), float64)"),
    (lambda: K.gemm(np.zeros((2, 3)), np.zeros((2, 4)), False, np.zeros((5, 3)), False, 1, 0), ValueError,
     "gemm: op(a) is 2 x 4, op(b) 5 x 3: they do not make out (shape (2, 3), float64)"),
    (lambda: K.gemm(np.zeros((2, 3), np.int64), np.zeros((2, 4)), False, np.zeros((4, 3)), False, 1, 0), TypeError,
     "gemm: unsupported dtype out (shape (2, 3), int64); supported: float32, float64"),
    (lambda: K.gemm(np.zeros((3, 2)).T, np.zeros((2, 4)), False, np.zeros((4, 3)), False, 1, 0), ValueError,
     "gemm: out (shape (2, 3), float64) must be C"),
])
def test_gemm_refuses_bad_arguments(call, error, message) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_the_backends_products_run_on_the_pool_and_the_blas_keeps_one_thread() -> None:
    from threadpoolctl import threadpool_info

    from minitorch_accum.backend import set_threads, thread_settings
    from minitorch_accum.backend.numpy_backend import NumpyBackend

    settings = set_threads(2)
    try:
        assert settings.gemm == "native pool" and "GEMMs on the native pool" in settings.summary()
        # the BLAS libraries keep one thread; an OpenMP pool (torch's, scikit-learn's) gets the count
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas and {pool["num_threads"] for pool in blas} == {1} and settings.native == 2
        assert min(thread_settings().blas.values()) == 1
        a = np.random.default_rng(2).standard_normal((64, 8)).astype(np.float32)
        np.testing.assert_allclose(NumpyBackend().matmul(a.T, a), a.T @ a, rtol=1e-5, atol=1e-5)
    finally:
        set_threads()


# ------------------------------------------------------------------ stacks of products (attention's)
def _attention_operands(dtype):
    """q, k, v as CausalSelfAttention makes them: slices of one qkv product, heads moved forward
    (no matrix of them contiguous), with values over many binades."""
    rng = np.random.default_rng(5)
    qkv = (rng.standard_normal((6, 32, 3 * 64)) * np.exp(3 * rng.standard_normal((6, 32, 3 * 64)))).astype(dtype)
    return [t.reshape(6, 32, 4, 16).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, axis=2)]


def _matrix_by_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemm on each pair of matrices, copied C-contiguous: float32's documented order."""
    a3, b3 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
    out = np.empty((a3.shape[0], a.shape[-2], b.shape[-1]), a.dtype)
    for i in range(a3.shape[0]):
        K.gemm(out[i], np.ascontiguousarray(a3[i]), False, np.ascontiguousarray(b3[i]), False, 1.0, 0.0)
    return out.reshape(*a.shape[:-1], b.shape[-1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stack_is_gemm_on_each_matrix_bit_for_bit_in_every_layout(threads, dtype) -> None:
    # float64: NumPy's matmul (the same BLAS calls); float32: gemm's own kernel on each matrix
    q, k, v = _attention_operands(dtype)
    rng = np.random.default_rng(6)
    p = rng.standard_normal((6, 4, 32, 32)).astype(dtype)
    g = rng.standard_normal((6, 4, 32, 16)).astype(dtype)
    pairs = {
        "q k^T": (q, np.swapaxes(k, -1, -2)),  # b transposed and strided
        "p v": (p, v),
        "p^T g": (np.swapaxes(p, -1, -2), g),  # a transposed
        "g v^T": (g, np.swapaxes(v, -1, -2)),
        "3-D": (rng.standard_normal((5, 7, 3)).astype(dtype), rng.standard_normal((5, 3, 9)).astype(dtype)),
        "broadcast batch stride 0": (np.broadcast_to(rng.standard_normal((1, 6, 4)).astype(dtype), (3, 6, 4)),
                                     rng.standard_normal((3, 4, 5)).astype(dtype)),
    }
    for name, (a, b) in pairs.items():
        out = np.full((*a.shape[:-1], b.shape[-1]), np.nan, dtype=dtype)
        assert K.stacked_gemm(a, b, out), name
        expected = np.matmul(a, b) if dtype == np.float64 else _matrix_by_matrix(a, b)
        np.testing.assert_array_equal(out, expected, err_msg=name)
        exact = np.matmul(a.astype(np.float64), b.astype(np.float64))
        magnitude = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
        unit = np.finfo(dtype).eps / 2
        assert np.all(np.abs(out - exact) <= (a.shape[-1] + 2) * unit * magnitude), name
    # a matrix of one row or one column NumPy hands to gemv or dot (other bits under Haswell): the
    # same product, within rounding
    degenerate = {
        "one row": (rng.standard_normal((4, 1, 8)).astype(dtype), rng.standard_normal((4, 8, 2)).astype(dtype)),
        "one column": (rng.standard_normal((4, 8, 1)).astype(dtype), rng.standard_normal((4, 1, 5)).astype(dtype)),
    }
    for name, (a, b) in degenerate.items():
        out = np.full((*a.shape[:-1], b.shape[-1]), np.nan, dtype=dtype)
        assert K.stacked_gemm(a, b, out), name
        np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_stacks_bits_do_not_depend_on_the_thread_count() -> None:
    q, k, _ = _attention_operands(np.float32)
    results = []
    for count in (1, 2):
        K.set_native_threads(count)
        out = np.empty((6, 4, 32, 32), np.float32)
        K.stacked_gemm(q, np.swapaxes(k, -1, -2), out)
        results.append(out)
    K.set_native_threads(0)
    np.testing.assert_array_equal(results[0], results[1])


def test_a_stack_blas_cannot_read_is_left_to_the_caller_untouched() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 4, 10)).astype(np.float32)[..., ::2]  # no unit stride in its matrices
    b = rng.standard_normal((3, 5, 6)).astype(np.float32)
    out = np.full((3, 4, 6), 7.0, np.float32)
    assert not K.stacked_gemm(a, b, out)
    assert np.all(out == 7.0)
    empty_k = np.full((3, 4, 6), 7.0, np.float32)
    assert not K.stacked_gemm(np.zeros((3, 4, 0), np.float32), np.zeros((3, 0, 6), np.float32), empty_k)


@pytest.mark.parametrize(
    ("a", "b", "out", "message"),
    [
        (np.zeros((2, 3, 4), np.float32), np.zeros((2, 4, 5), np.float64), np.zeros((2, 3, 5), np.float32),
         r"b \(shape \(2, 4, 5\), float64\) must have the dtype of out"),
        (np.zeros((2, 3, 4), np.float32), np.zeros((4, 5), np.float32), np.zeros((2, 3, 5), np.float32),
         r"b \(shape \(4, 5\), float32\) must have the axes of out"),
        (np.zeros((3, 4), np.float32), np.zeros((4, 5), np.float32), np.zeros((3, 5), np.float32),
         r"out \(shape \(3, 5\), float32\) must have 3 axes or more"),
        (np.zeros((2, 3, 4), np.float32), np.zeros((3, 4, 5), np.float32), np.zeros((2, 3, 5), np.float32),
         r"the batch axes of a .* and b \(shape \(3, 4, 5\), float32\) must be those of out"),
        (np.zeros((2, 3, 4), np.float32), np.zeros((2, 6, 5), np.float32), np.zeros((2, 3, 5), np.float32),
         r"a \(shape \(2, 3, 4\), float32\) times b \(shape \(2, 6, 5\), float32\) does not make out"),
        (np.zeros((2, 3, 4), np.float32), np.zeros((2, 4, 5), np.float32),
         np.zeros((2, 5, 3), np.float32).transpose(0, 2, 1), r"out .* C-contiguous"),
        (np.zeros((2, 3, 4), np.int32), np.zeros((2, 4, 5), np.int32), np.zeros((2, 3, 5), np.int32),
         r"unsupported dtype out"),
    ],
)
def test_a_stack_names_what_does_not_fit(a, b, out, message) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        K.stacked_gemm(a, b, out)


def test_the_backend_runs_attentions_stacks_natively_and_broadcasts_natively_too(monkeypatch) -> None:
    from minitorch_accum.backend.numpy_backend import NumpyBackend

    ran = []
    real = K.stacked_gemm
    monkeypatch.setattr(K, "stacked_gemm", lambda a, b, out: ran.append((a.shape, b.shape)) or real(a, b, out))
    backend = NumpyBackend()
    q, k, _ = _attention_operands(np.float32)
    k_t = np.swapaxes(k, -1, -2)
    np.testing.assert_array_equal(backend.batched_matmul(q, k_t), _matrix_by_matrix(q, k_t))
    assert ran == [(q.shape, k_t.shape)]
    rng = np.random.default_rng(8)
    for dtype in (np.float32, np.float64):
        ran.clear()
        # batch axes that broadcast, and a matrix times a stack: each pair's product is gemm's, bit for bit
        a = rng.standard_normal((2, 1, 3, 40)).astype(dtype)
        for left, right in ((a, rng.standard_normal((1, 5, 40, 7)).astype(dtype)),
                            (rng.standard_normal((7, 3)).astype(dtype), a[0])):
            batch = np.broadcast_shapes(left.shape[:-2], right.shape[:-2])
            want = _matrix_by_matrix(np.broadcast_to(left, (*batch, *left.shape[-2:])),
                                     np.broadcast_to(right, (*batch, *right.shape[-2:])))
            got = backend.batched_matmul(left, right)
            assert got.shape == np.matmul(left, right).shape
            np.testing.assert_array_equal(got, want)
        assert ran[0] == ((2, 5, 3, 40), (2, 5, 40, 7))  # the broadcast views, not copies
        # matrices of no unit stride are copied, then run natively
        ran.clear()
        every_other = rng.standard_normal((3, 8, 80)).astype(dtype)[:, :, ::2]
        w = rng.standard_normal((3, 40, 5)).astype(dtype)
        np.testing.assert_array_equal(backend.batched_matmul(every_other, w), _matrix_by_matrix(every_other, w))
        assert len(ran) == 2
    mixed = backend.batched_matmul(rng.standard_normal((2, 1, 3, 4)).astype(np.float32),
                                   rng.standard_normal((2, 1, 4, 2)))  # two dtypes: NumPy's promotion
    assert mixed.dtype == np.float64 and len(ran) == 2
    empty = backend.batched_matmul(np.ones((2, 3, 0), np.float32), np.ones((2, 0, 4), np.float32))  # k = 0
    np.testing.assert_array_equal(empty, np.zeros((2, 3, 4), np.float32))


# ------------------------------------------------------------------ a GEMM handed to a helper
def test_a_gemm_in_the_background_writes_gemms_bits_while_the_caller_runs_another() -> None:
    K.set_native_threads(2)
    try:
        rng = np.random.default_rng(9)
        a, g = rng.standard_normal((1024, 64)).astype(np.float32), rng.standard_normal((1024, 192)).astype(np.float32)
        want = rng.standard_normal((64, 192)).astype(np.float32)
        got = want.copy()
        K.gemm(want, a, True, g, False, 0.25, 1.0)
        assert K.gemm_start(got, a, True, g, False, 0.25, 1.0)
        x, w = rng.standard_normal((1024, 192)).astype(np.float32), rng.standard_normal((192, 64)).astype(np.float32)
        y = np.empty((1024, 64), np.float32)
        K.gemm(y, x, False, w, False, 1.0, 0.0)  # meanwhile, on the caller's thread
        K.gemm_finish()
        np.testing.assert_array_equal(got, want)
        alone = np.empty((1024, 64), np.float32)
        K.gemm(alone, x, False, w, False, 1.0, 0.0)
        np.testing.assert_array_equal(y, alone)
        K.gemm_finish()  # nothing in flight: nothing happens
    finally:
        K.set_native_threads(0)


def test_the_background_holds_its_arrays_and_a_second_start_finishes_the_first() -> None:
    K.set_native_threads(2)
    try:
        rng = np.random.default_rng(10)
        outs, wants = [], []
        for _ in range(2):
            a = rng.standard_normal((512, 128)).astype(np.float64)
            b = rng.standard_normal((128, 256)).astype(np.float64)
            wants.append(a @ b)
            outs.append(np.empty((512, 256)))
            assert K.gemm_start(outs[-1], a, False, b, False, 1.0, 0.0)
            del a, b  # the native side keeps them until it is done
        K.gemm_finish()
        for got, want in zip(outs, wants, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    finally:
        K.set_native_threads(0)


def test_without_a_free_helper_or_work_enough_the_gemm_runs_at_once() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((256, 64)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
    for threads, shape in ((1, (256, 64, 128)), (2, (8, 8, 8))):
        K.set_native_threads(threads)
        try:
            m, k, n = shape
            left, right = a[:m, :k].copy(), b[:k, :n].copy()
            out, want = np.empty((m, n), np.float32), np.empty((m, n), np.float32)
            K.gemm(want, left, False, right, False, 1.0, 0.0)
            assert not K.gemm_start(out, left, False, right, False, 1.0, 0.0)
            np.testing.assert_array_equal(out, want)  # written already
        finally:
            K.set_native_threads(0)

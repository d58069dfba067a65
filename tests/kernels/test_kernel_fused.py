"""The fused layer kernels (GELU, LayerNorm, softmax cross entropy, embedding backward, softmax
rows): the native loops and the emulated CUDA kernels give the NumPy reference's bits on every shape,
dtype, edge value and launch grid; errors are the same on every path."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum.kernels as K
from tests.kernels.kernel_cases import CPU_PATHS, assert_same_bits, on_path

PATHS = CPU_PATHS if K.native_available() else ("reference", "emulated")
dtypes = st.sampled_from([np.float32, np.float64])
seeds = st.integers(0, 2**32 - 1)
# around the 32 lanes of a row and the 64-row chunks of the column sums
columns = st.one_of(st.sampled_from([1, 2, 31, 32, 33, 64, 65, 100]), st.integers(1, 140))
rows = st.one_of(st.sampled_from([0, 1, 7, 8, 9, 63, 64, 65, 129]), st.integers(0, 150))
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-300, 40.0, -40.0, 1e5, -1e5, 3e38, -3e38]


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, special: bool = False) -> np.ndarray:
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-2, 2, shape))).astype(dtype)
    if special and x.size:
        flat = x.reshape(-1)
        picks = rng.integers(0, flat.size, min(flat.size, len(SPECIAL)))
        with np.errstate(over="ignore"):
            flat[picks] = np.array(SPECIAL[: picks.size]).astype(dtype)
    return x


def on_every_path(run: Callable[[], Any], grid: int | None = None) -> None:
    """run() on each CPU path; every array it returns has the reference's bits."""
    with on_path("reference"):
        expected = run()
    for path in PATHS[1:]:
        with on_path(path, grid=grid if path == "emulated" else None):
            actual = run()
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            if e is None or np.isscalar(e):
                assert a == e, (path, i)
            else:
                assert_same_bits(a, e, f"{path} output {i}")


@given(st.integers(0, 3000), dtypes, seeds, st.sampled_from(K.GELU_FORMS), st.booleans(),
       st.sampled_from([None, 1, 3]))
def test_gelu_forward_and_backward_on_every_path(n, dtype, seed, approximate, special, grid) -> None:
    rng = np.random.default_rng(seed)
    x = values(rng, (n,), dtype, special)
    g = values(rng, (n,), dtype)
    on_every_path(lambda: (K.gelu_forward(x, approximate), K.gelu_backward(x, g, approximate)), grid)


@given(rows, columns, dtypes, seeds, st.booleans(), st.booleans(), st.sampled_from([None, 1, 2]))
def test_layer_norm_forward_and_backward_on_every_path(r, c, dtype, seed, with_weight, with_bias, grid) -> None:
    rng = np.random.default_rng(seed)
    x = values(rng, (r, c), dtype) + dtype(rng.normal() * 10)
    w = values(rng, (c,), dtype) if with_weight else None
    b = values(rng, (c,), dtype) if with_bias else None
    g = values(rng, (r, c), dtype)

    def run():
        y, mean, rstd = K.layer_norm_forward(x, w, b, 1e-5)
        return (y, mean, rstd, *K.layer_norm_backward(x, w, mean, rstd, g, bias_grad=with_bias))

    on_every_path(run, grid)


@given(rows, columns, dtypes, seeds, st.sampled_from([-100, 0, 3]), st.floats(0, 1), st.booleans())
def test_cross_entropy_forward_and_backward_on_every_path(r, c, dtype, seed, ignore_index, ignored, special) -> None:
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):  # 3e38 * 5 is inf in float32: one more edge value
        logits = values(rng, (r, c), dtype, special) * dtype(5)
    targets = rng.integers(0, c, r)
    # ignored items; an ignore_index that is also a class index ignores that class's items too
    targets[rng.uniform(size=r) < ignored] = ignore_index
    grad = values(rng, (r,), dtype)

    def run():
        losses, lse, count = K.cross_entropy_forward(logits, targets, ignore_index)
        return losses, lse, count, K.cross_entropy_backward(logits, targets, lse, grad, ignore_index)

    on_every_path(run)


@given(st.integers(0, 300), st.integers(1, 70), st.integers(1, 40), dtypes, seeds)
def test_embedding_backward_on_every_path(n, dim, table_rows, dtype, seed) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, max(1, table_rows // 3), n)  # repeated ids, and rows no id touches
    grad = values(rng, (n, dim), dtype)
    on_every_path(lambda: (K.embedding_backward(ids, grad, table_rows),))


@given(rows, columns, dtypes, seeds, st.sampled_from([None, 1, 4, "causal"]), st.floats(0.01, 4), st.booleans(),
       st.sampled_from([None, 1, 2]))
def test_softmax_forward_and_backward_on_every_path(r, c, dtype, seed, bias_rows, scale, special, grid) -> None:
    rng = np.random.default_rng(seed)
    if bias_rows == "causal":  # an attention mask: a query sees the keys up to its own position
        bias_rows = c
        bias = np.where(np.tri(c, c, dtype=bool), 0.0, -np.inf).astype(dtype)
    else:
        bias = None if bias_rows is None else values(rng, (bias_rows, c), dtype, special)
    r = r - r % bias_rows if bias_rows else r  # a whole number of the bias's blocks
    with np.errstate(over="ignore"):  # 3e38 * 5 is inf in float32: one more edge value
        x = values(rng, (r, c), dtype, special) * dtype(5)
    g = values(rng, (r, c), dtype)

    def run():
        y = K.softmax_forward(x, bias, scale)
        return y, K.softmax_backward(y, g, scale)

    on_every_path(run, grid)


def test_softmax_masks_with_its_bias_rows_and_sums_to_one() -> None:
    x = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)
    bias = np.where(np.tri(3, 3, dtype=bool), 0.0, -np.inf).astype(np.float32)
    for path in PATHS:
        with on_path(path):
            y = K.softmax_forward(x, bias, 0.5)
        assert (y[np.tile(bias, (2, 1)) == -np.inf] == 0).all(), path  # row r takes bias row r % 3
        assert y[0, 0] == 1 and y[3, 0] == 1, path
        np.testing.assert_allclose(y.sum(1), 1, rtol=1e-6)
        e = np.exp(x * 0.5 + np.tile(bias, (2, 1)))
        np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=2e-6)


def test_embedding_backward_adds_repeated_ids_in_order_and_zeroes_untouched_rows() -> None:
    ids = np.array([2, 0, 2, 2])
    grad = np.array([[1.0], [5.0], [1e-8], [-1.0]], np.float32)
    for path in PATHS:
        with on_path(path):
            out = K.embedding_backward(ids, grad, 4)
        expected = np.array([[5.0], [0.0], [np.float32(np.float32(1.0) + np.float32(1e-8)) - 1.0], [0.0]], np.float32)
        assert_same_bits(out, expected, path)


def test_cross_entropy_of_an_all_ignored_batch_is_zero_with_zero_gradient() -> None:
    logits = np.random.default_rng(0).standard_normal((5, 4))
    targets = np.full(5, -100)
    for path in PATHS:
        with on_path(path):
            losses, lse, count = K.cross_entropy_forward(logits, targets)
            grad = K.cross_entropy_backward(logits, targets, lse, np.ones(5))
        assert count == 0 and (losses == 0).all() and (grad == 0).all() and np.isfinite(lse).all()


def test_layer_norm_of_one_element_per_row_is_the_bias() -> None:
    x = np.array([[3.0], [-1e30], [0.0]])
    w, b = np.array([2.0]), np.array([0.25])
    for path in PATHS:
        with on_path(path):
            y, mean, rstd = K.layer_norm_forward(x, w, b, 1e-5)
            gx, gw, gb = K.layer_norm_backward(x, w, mean, rstd, np.ones((3, 1)))
        assert (y == 0.25).all() and (mean == x[:, 0]).all() and (gx == 0).all()
        assert gw[0] == 0 and gb[0] == 3.0


def test_gelu_at_large_magnitudes() -> None:
    x = np.array([1e4, -1e4, 40.0, -40.0, np.inf, -np.inf])
    for approximate in K.GELU_FORMS:
        for path in PATHS:
            with on_path(path):
                y = K.gelu_forward(x, approximate)
                d = K.gelu_backward(x, np.ones_like(x), approximate)
            assert y[0] == 1e4 and y[2] == 40.0 and y[4] == np.inf
            assert y[1] == 0 and y[3] == 0 and np.isnan(y[5])  # -inf * 0, as in PyTorch
            assert d[0] == 1.0 and d[1] == 0 and d[2] == 1.0 and d[3] == 0


ERRORS = [
    (lambda: K.gelu_forward(np.zeros(3, np.int64)), TypeError,
     "gelu_forward: unsupported dtype x (shape (3,), int64); supported: float32, float64"),
    (lambda: K.gelu_backward(np.zeros(3), np.zeros(3, np.float32)), TypeError,
     "gelu_backward: grad (shape (3,), float32) must have the dtype of x (shape (3,), float64)"),
    (lambda: K.gelu_backward(np.zeros(3), np.zeros(4)), ValueError,
     "gelu_backward: grad (shape (4,), float64) must have shape (3,) to match x"),
    (lambda: K.gelu_forward(np.zeros((3, 2)).T), ValueError, "gelu_forward: x (shape (2, 3), float64) must be C"),
    (lambda: K.layer_norm_forward(np.zeros(3), None, None), ValueError,
     "layer_norm_forward: x (shape (3,), float64) must have 2 axes"),
    (lambda: K.layer_norm_forward(np.zeros((2, 3)), np.ones(4), None), ValueError,
     "layer_norm_forward: weight (shape (4,), float64) must have shape (3,) to match x"),
    (lambda: K.layer_norm_backward(np.zeros((2, 3)), None, np.zeros(2, np.float32), np.zeros(2), np.zeros((2, 3))),
     TypeError, "layer_norm_backward: mean (shape (2,), float32) must be float64"),
    (lambda: K.cross_entropy_forward(np.zeros((2, 3)), np.array([0, 3])), ValueError,
     "cross_entropy_forward: targets[1] = 3 is out of range for 3 classes (ignore_index=-100)"),
    (lambda: K.cross_entropy_forward(np.zeros((2, 3)), np.array([0, 1], np.int32)), TypeError,
     "cross_entropy_forward: targets (shape (2,), int32) must be int64"),
    (lambda: K.cross_entropy_forward(np.zeros((2, 0)), np.array([-100, -100])), ValueError,
     "cross_entropy_forward: logits (shape (2, 0), float64) must have at least one class"),
    (lambda: K.embedding_backward(np.array([0, 5]), np.zeros((2, 3)), 5), ValueError,
     "embedding_backward: ids[1] = 5 is out of range for 5 rows"),
    (lambda: K.embedding_backward(np.array([0, 1]), np.zeros((3, 2)), 5), ValueError,
     "embedding_backward: grad (shape (3, 2), float64) must have shape (2, 2) to match out"),
    (lambda: K.gelu_forward([1.0, 2.0]), TypeError, "gelu_forward: x must be a NumPy or CuPy array, got list"),
    (lambda: K.softmax_forward(np.zeros((6, 3)), np.zeros((4, 3))), ValueError,
     "softmax_forward: x (shape (6, 3), float64) has 6 rows, not a multiple of the rows of bias "
     "(shape (4, 3), float64)"),
    (lambda: K.softmax_forward(np.zeros((6, 3)), np.zeros((2, 4))), ValueError,
     "softmax_forward: bias (shape (2, 4), float64) must have shape (2, 3) to match x (shape (6, 3), float64)"),
    (lambda: K.softmax_forward(np.zeros((6, 3)), np.zeros((2, 3), np.float32)), TypeError,
     "softmax_forward: bias (shape (2, 3), float32) must have the dtype of x (shape (6, 3), float64)"),
    (lambda: K.softmax_backward(np.zeros((6, 3)), np.zeros((6, 2))), ValueError,
     "softmax_backward: grad (shape (6, 2), float64) must have shape (6, 3) to match probs (shape (6, 3), float64)"),
    (lambda: K.gelu_forward(np.zeros(2), "erf"), ValueError, "approximate must be 'none' or 'tanh', got 'erf'"),
]


@pytest.mark.parametrize("case", range(len(ERRORS)))
@pytest.mark.parametrize("path", PATHS)
def test_every_path_refuses_bad_arguments_with_the_same_message(case: int, path: str) -> None:
    call, error, message = ERRORS[case]
    with on_path(path), pytest.raises(error, match=re.escape(message)):
        call()


def test_outputs_that_overlap_an_input_are_refused() -> None:
    x = np.zeros(8)
    for path in PATHS:
        with on_path(path), pytest.raises(ValueError, match="share memory"):
            K.gelu_forward(x, out=x)


@pytest.mark.skipif(not K.native_available(), reason="needs the native extension")
def test_every_kernel_the_fused_plans_launch_is_compiled_and_registered() -> None:
    # the emulator registers exactly the kernels the .cu files define (test_kernel_sources)
    from minitorch_accum.kernels.launch import emulator

    registered = emulator.kernels()
    for suffix in ("f32", "f64"):
        for stem in ("gelu_forward", "gelu_backward", "layer_norm_forward", "layer_norm_input_grad",
                     "layer_norm_column_partials", "layer_norm_column_finish", "cross_entropy_forward",
                     "cross_entropy_backward", "embedding_backward", "softmax_forward", "softmax_backward"):
            assert f"mta_{stem}_{suffix}" in registered, (stem, suffix)
    # row kernels synchronize: their threads run as fibers
    assert registered["mta_cross_entropy_forward_f32"][1:] == (256, True)

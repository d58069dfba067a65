"""The ops that run on the fused layer kernels (GELU, LayerNorm, cross entropy, embedding) give
PyTorch's values and gradients in float64, on every CPU kernel path, under hypothesis.

Tolerances: the kernels compute in float64 with their own erf, exp and log (each within 1 ulp)
and sum rows in another order than PyTorch, so values agree to a few ulps of the largest term;
GELU's 0.5 x (1 + erf) carries erf's rounding (~1e-16 absolute) times |x| in either library."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minitorch_accum as mta
import minitorch_accum.kernels as K
from minitorch_accum.nn import functional as F
from tests.kernels.kernel_cases import on_path

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

PATHS = ("reference", "native", "emulated") if K.native_available() else ("reference", "emulated")
paths = st.sampled_from(PATHS)
seeds = st.integers(0, 2**32 - 1)


def leaf(values: np.ndarray) -> mta.Tensor:
    return mta.tensor(values, dtype="float64", requires_grad=True)


def close(ours, theirs, atol: float = 1e-13, rtol: float = 1e-12) -> None:
    np.testing.assert_allclose(np.asarray(ours), theirs.detach().numpy(), rtol=rtol, atol=atol)


@given(seeds, st.sampled_from(["none", "tanh"]), paths, st.integers(1, 300))
def test_gelu_value_and_gradient_match_pytorch(seed: int, approximate: str, path: str, n: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp(rng.uniform(-3, 3, n))
    x[: min(n, 6)] = [40.0, -40.0, 1e4, -1e4, 0.0, -7.5][: min(n, 6)]  # large |x| too
    g = rng.standard_normal(n)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx, approximate=approximate)
    ty.backward(torch.tensor(g))
    with on_path(path):
        ours = leaf(x)
        y = F.gelu(ours, approximate=approximate)
        grads = (y * mta.tensor(g, dtype="float64")).sum().backward()
    # 2 ulps of 1 times |x|: the rounding 0.5 x (1 + erf) or 0.5 x (1 + tanh) carries in either library
    bound = 4 * 2**-52 * np.maximum(np.abs(x), 1.0)
    assert (np.abs(y.numpy() - ty.detach().numpy()) <= bound + 1e-15 * np.abs(x)).all()
    assert (np.abs(grads[ours] - tx.grad.numpy()) <= 4 * bound * np.maximum(np.abs(g), 1.0)).all()


@given(seeds, st.integers(1, 40), st.integers(1, 70), st.booleans(), paths)
def test_layer_norm_value_and_gradients_match_pytorch(seed: int, rows: int, cols: int, bias: bool, path: str) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * 3 + rng.normal() * 5
    w, b = rng.standard_normal(cols), rng.standard_normal(cols)
    g = rng.standard_normal((rows, cols))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True) if bias else None
    ty = torch.nn.functional.layer_norm(tx, (cols,), tw, tb, 1e-5)
    ty.backward(torch.tensor(g))
    with on_path(path):
        ours_x, ours_w = leaf(x), leaf(w)
        ours_b = leaf(b) if bias else None
        y = F.layer_norm(ours_x, ours_w, ours_b, eps=1e-5)
        grads = (y * mta.tensor(g, dtype="float64")).sum().backward()
    close(y.numpy(), ty, atol=1e-12)
    close(grads[ours_x], tx.grad, atol=1e-10)
    close(grads[ours_w], tw.grad, atol=1e-10)
    if bias:
        close(grads[ours_b], tb.grad, atol=1e-10)


@given(seeds, st.integers(1, 30), st.integers(1, 50), st.sampled_from(["sum", "mean"]), st.floats(0, 0.9), paths)
def test_cross_entropy_value_and_gradient_match_pytorch(seed: int, items: int, classes: int, reduction: str,
                                                        ignored: float, path: str) -> None:
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((items, classes)) * 4
    targets = rng.integers(0, classes, items)
    targets[rng.uniform(size=items) < ignored] = -100
    targets[0] = 0  # at least one item, so the mean is defined
    tl = torch.tensor(logits, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tl, torch.tensor(targets), reduction=reduction, ignore_index=-100)
    tloss.backward()
    with on_path(path):
        ours = leaf(logits)
        loss = F.cross_entropy(ours, targets, reduction=reduction, ignore_index=-100)
        grads = loss.backward()
    close(loss.numpy(), tloss, atol=1e-12)
    close(grads[ours], tl.grad, atol=1e-13)
    assert F.count_items(targets) == int((targets != -100).sum())


@pytest.mark.parametrize("path", PATHS)
def test_cross_entropy_of_an_all_ignored_batch_matches_pytorch(path: str) -> None:
    logits = np.random.default_rng(0).standard_normal((4, 3))
    targets = np.full(4, -100)
    tl = torch.tensor(logits, requires_grad=True)
    tsum = torch.nn.functional.cross_entropy(tl, torch.tensor(targets), reduction="sum")
    tsum.backward()
    tmean = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(targets), reduction="mean")
    with on_path(path), np.errstate(invalid="ignore"):
        ours = leaf(logits)
        loss = F.cross_entropy(ours, targets, reduction="sum")
        grads = loss.backward()
        mean = F.cross_entropy(leaf(logits), targets, reduction="mean")
    assert float(loss.numpy()) == float(tsum.detach()) == 0.0
    assert (grads[ours] == 0).all() and (tl.grad.numpy() == 0).all()
    assert np.isnan(mean.numpy()) and bool(torch.isnan(tmean))


@given(seeds, st.integers(1, 200), st.integers(1, 30), st.integers(1, 20), paths)
def test_embedding_gradient_matches_pytorch(seed: int, n: int, vocab: int, dim: int, path: str) -> None:
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((vocab, dim))
    ids = rng.integers(0, vocab, n)
    g = rng.standard_normal((n, dim))
    tt = torch.tensor(table, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(ids), tt).backward(torch.tensor(g))
    with on_path(path):
        ours = leaf(table)
        grads = (F.embedding(ids, ours) * mta.tensor(g, dtype="float64")).sum().backward()
    close(grads[ours], tt.grad, atol=1e-13)

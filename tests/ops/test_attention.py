"""Scaled dot-product attention: the fused op against finite differences and against the
same attention composed of matmul, masked_fill and softmax."""

from __future__ import annotations

import math

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import gradcheck
from tests.ops.helpers import leaf


def composed(q: mta.Tensor, k: mta.Tensor, v: mta.Tensor, mask: np.ndarray | None) -> mta.Tensor:
    scores = q @ k.mT * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(~mta.tensor(mask), float("-inf"))
    return scores.softmax(dim=-1) @ v


def qkv(seed: int, batch: tuple[int, ...] = (2, 3), length: int = 4, source: int = 5) -> list[mta.Tensor]:
    rng = np.random.default_rng(seed)
    return [leaf(rng.normal(size=batch + (n, e))) for n, e in ((length, 6), (source, 6), (source, 7))]


@pytest.mark.parametrize("mask_kind", ["none", "causal", "bool", "float"])
def test_attention_gradients(mask_kind: str) -> None:
    q, k, v = qkv(0, batch=(2,), length=3, source=4)
    rng = np.random.default_rng(1)
    mask = {"none": None, "causal": None, "bool": rng.random((3, 4)) > 0.3, "float": rng.normal(size=(2, 3, 4))}
    mask = mask[mask_kind]
    if mask_kind == "bool":
        mask[:, 0] = True  # every query sees at least one key
    weights = rng.normal(size=(2, 3, 7))
    gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask, is_causal=mask_kind == "causal")
              * weights, [q, k, v])


def test_fused_attention_equals_the_composed_one() -> None:
    q, k, v = qkv(2, length=5, source=5)
    causal = np.tri(5, dtype=bool)
    weights = np.random.default_rng(3).normal(size=(2, 3, 5, 7))
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    reference = composed(q, k, v, causal)
    np.testing.assert_allclose(fused.numpy(), reference.numpy(), rtol=1e-13, atol=1e-15)
    ours = (fused * weights).sum().backward()
    theirs = (reference * weights).sum().backward()
    for t in (q, k, v):
        np.testing.assert_allclose(ours[t], theirs[t], rtol=1e-12, atol=1e-14)


def test_float32_attention_runs_the_softmax_row_kernels_and_agrees_with_the_array_form(monkeypatch) -> None:
    from minitorch_accum.backend.base import Backend

    calls = []
    for name in ("softmax", "softmax_backward"):
        original = getattr(Backend, name)
        monkeypatch.setattr(Backend, name, lambda self, *a, _f=original, _n=name: calls.append(_n) or _f(self, *a))
    q, k, v = (mta.tensor(t.numpy().astype(np.float32), requires_grad=True) for t in qkv(6, length=5, source=5))
    weights = np.random.default_rng(7).normal(size=(2, 3, 5, 7)).astype(np.float32)
    causal = np.tri(5, dtype=bool)
    # the same mask with the batch's axes: not one (L, S) block, so the array-library form runs
    per_head = np.broadcast_to(causal, (2, 3, 5, 5)).copy()
    fused = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    ours = (fused * weights).sum().backward()
    assert calls == ["softmax", "softmax_backward"]
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=per_head)
    theirs = (reference * weights).sum().backward()
    assert calls == ["softmax", "softmax_backward"] and fused.dtype == mta.float32
    np.testing.assert_allclose(fused.numpy(), reference.numpy(), rtol=2e-6, atol=1e-6)
    for t in (q, k, v):
        np.testing.assert_allclose(ours[t], theirs[t], rtol=1e-5, atol=1e-5)


def test_attention_dropout_uses_one_mask_for_forward_and_backward() -> None:
    q, k, v = qkv(4, batch=(1,), length=3, source=3)

    def fn(a: mta.Tensor, b: mta.Tensor, c: mta.Tensor) -> mta.Tensor:
        return F.scaled_dot_product_attention(a, b, c, dropout_p=0.3, rng=np.random.default_rng(5))

    gradcheck(fn, [q, k, v])
    assert not np.allclose(fn(q, k, v).numpy(), F.scaled_dot_product_attention(q, k, v).numpy())


def test_attention_scale_and_errors() -> None:
    q, k, v = qkv(6, batch=(1,))
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, scale=0.5).numpy(),
                               composed(q * math.sqrt(6) * 0.5, k, v, None).numpy(), rtol=1e-13)
    with pytest.raises(ValueError, match="give attn_mask or is_causal=True, not both"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((4, 5), dtype=bool), is_causal=True)
    with pytest.raises(mta.OpError, match=r"attn_mask of shape \(3, 3\) does not broadcast to the scores' shape"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 3), dtype=bool))
    with pytest.raises(mta.OpError, match=r"query \(1, 4, 6\), key \(1, 5, 7\) and value \(1, 5, 7\) must be"):
        F.scaled_dot_product_attention(q, v, v)


def test_attention_refuses_mixed_dtypes_other_ranks_and_names_itself() -> None:
    q, k, v = qkv(7, batch=(1,))
    with pytest.raises(TypeError, match=r"scaled_dot_product_attention: query is float64 on cpu but another input "
                                        r"is float32 on cpu"):
        F.scaled_dot_product_attention(q, k.to(dtype="float32"), v)
    with pytest.raises(mta.OpError, match=r"query \(1, 4, 6\), key \(5, 6\) and value \(1, 5, 7\) must be "
                                          r"\(\.\.\., L, E\), \(\.\.\., S, E\) and \(\.\.\., S, Ev\)$"):
        F.scaled_dot_product_attention(q, k[0], v)
    with pytest.raises(mta.OpError, match=r"query \(1, 4, 6\), key \(1, 5, 6\) and value \(5, 7\) must be"):
        F.scaled_dot_product_attention(q, k, v[0])
    with pytest.raises(mta.OpError, match=r"query \(6,\)"):
        F.scaled_dot_product_attention(q[0, 0], k[0], v[0])
    with pytest.raises(ValueError, match=r"^scaled_dot_product_attention: dropout_p must be in \[0, 1\), got -0.1$"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=-0.1)
    # 2-D operands are one head: the same as a batch of one
    np.testing.assert_array_equal(F.scaled_dot_product_attention(q[0], k[0], v[0]).numpy(),
                                  F.scaled_dot_product_attention(q, k, v).numpy()[0])


def test_a_bool_mask_adds_zero_where_allowed_and_a_tensor_mask_is_read_as_its_array() -> None:
    from minitorch_accum.nn.functional import _attention_bias

    q = mta.tensor(np.zeros((2, 3), np.float32))
    allowed = np.array([[True, False], [True, True]])
    bias = _attention_bias("op", q, (2, 2), allowed, 0.0, False)
    assert bias.dtype == np.float32
    np.testing.assert_array_equal(bias, np.array([[0.0, -np.inf], [0.0, 0.0]], np.float32))
    floats = mta.tensor(np.array([[0.5, -1.0]], np.float64))
    got = _attention_bias("op", q, (2, 2), floats, 0.0, False)
    assert got.dtype == np.float32  # the scores' dtype, so that the fused softmax takes it
    np.testing.assert_array_equal(got, np.array([[0.5, -1.0]], np.float32))
    assert _attention_bias("op", q, (2, 2), None, 0.0, False) is None

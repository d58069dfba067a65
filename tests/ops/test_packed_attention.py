"""Attention over a packed qkv array: ``F.packed_qkv_attention`` is one op with the values and
the gradients of the split, the heads' views, ``scaled_dot_product_attention`` and the merge it
replaces (bit for bit, through the Linear that makes qkv), with every mask, dropout and scale;
bad input is refused naming what was wrong."""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import ops
from minitorch_accum.nn import functional as F
from minitorch_accum.ops.packed_attention import split_heads
from minitorch_accum.testing import gradcheck
from tests.ops.helpers import leaf


def _composed(qkv: mta.Tensor, n_head: int, **kwargs: object) -> mta.Tensor:
    """nanoGPT's way: split, view the heads, attend, merge."""
    *lead, length, width = qkv.shape
    c = width // 3
    q, k, v = (t.view(*lead, length, n_head, c // n_head).transpose(-3, -2) for t in qkv.split(c, dim=-1))
    y = F.scaled_dot_product_attention(q, k, v, **kwargs)  # type: ignore[arg-type]
    return y.transpose(-3, -2).contiguous().view(*lead, length, c)


def _both(lead: tuple[int, ...], length: int, c: int, n_head: int, dtype: type, seed: int = 0,
          **kwargs: object) -> tuple[list, list, mta.Tensor]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*lead, length, c)).astype(dtype)
    w = (rng.standard_normal((c, 3 * c)) * 0.4).astype(dtype)
    b = rng.standard_normal(3 * c).astype(dtype)
    upstream = rng.standard_normal((*lead, length, c)).astype(dtype)
    results = []
    for packed in (True, False):
        xt, wt, bt = (mta.tensor(a, requires_grad=True) for a in (x, w, b))
        qkv = F.linear(xt, wt, bt)
        run_kwargs = dict(kwargs)
        if "rng" in kwargs:
            run_kwargs["rng"] = np.random.default_rng(99)  # the same dropout draws on both sides
        y = F.packed_qkv_attention(qkv, n_head, **run_kwargs) if packed else _composed(qkv, n_head, **run_kwargs)
        grads = (y * mta.tensor(upstream)).sum().backward()
        results.append([y.data, grads[xt], grads[wt], grads[bt]])
        if packed:
            made = y
    return results[0], results[1], made


def _same_bits(got: list, expected: list) -> None:
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(np.asarray(g).view(np.uint8), np.asarray(e).view(np.uint8))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("lead", "length", "c", "n_head"), [((3,), 7, 12, 3), ((), 5, 8, 1), ((2, 2), 4, 16, 4),
                                                             ((4,), 32, 64, 4)])
def test_one_op_gives_the_bits_of_split_heads_attention_and_merge(lead, length, c, n_head, dtype, threads) -> None:
    mta.set_threads(threads)
    try:
        packed, composed, y = _both(lead, length, c, n_head, dtype, is_causal=True)
        assert y._node.fn is ops.PackedQKVAttention
        _same_bits(packed, composed)
    finally:
        mta.set_threads(None)


@pytest.mark.parametrize("mask", ["none", "bool", "float", "scale", "dropout"])
def test_every_mask_dropout_and_scale_of_the_composed_attention(mask: str) -> None:
    rng = np.random.default_rng(5)
    kwargs: dict[str, object] = {}
    if mask == "bool":
        allowed = rng.random((6, 6)) > 0.4
        allowed[:, 0] = True
        kwargs["attn_mask"] = allowed
    elif mask == "float":
        kwargs["attn_mask"] = rng.standard_normal((2, 2, 6, 6))  # one block per head
    elif mask == "scale":
        kwargs["scale"] = 0.3
    elif mask == "dropout":
        kwargs.update(dropout_p=0.25, rng=None)
    packed, composed, _ = _both((2,), 6, 8, 2, np.float64, seed=6, **kwargs)
    _same_bits(packed, composed)


def test_the_gradient_passes_gradcheck() -> None:
    rng = np.random.default_rng(7)
    qkv = leaf(rng.normal(size=(2, 4, 12)))
    weights = rng.normal(size=(2, 4, 4))
    gradcheck(lambda t: F.packed_qkv_attention(t, 2, is_causal=True) * weights, [qkv])


def test_heads_are_views_of_the_thirds_in_nanogpts_order() -> None:
    qkv = np.arange(2 * 3 * 12, dtype=np.float32).reshape(2, 3, 12)
    q, k, v = split_heads(np, qkv, 2)
    assert q.shape == (2, 2, 3, 2) and all(np.shares_memory(t, qkv) for t in (q, k, v))
    np.testing.assert_array_equal(k[1, 1, 2], qkv[1, 2, 4 + 2:4 + 4])  # k: second third, head 1 is its columns 2..3
    np.testing.assert_array_equal(v[0, 0, 1], qkv[0, 1, 8:10])


def test_the_gradient_writes_each_third_once_and_only_it() -> None:
    """q, k and v's gradients land in their own thirds; a value that flows to one third only
    leaves the others' gradient exactly zero."""
    rng = np.random.default_rng(8)
    data = rng.standard_normal((1, 3, 6))
    qkv = mta.tensor(data, requires_grad=True)
    grads = F.packed_qkv_attention(qkv, 1).sum().backward()
    g = np.asarray(grads[qkv])
    assert g.shape == (1, 3, 6) and np.isfinite(g).all()
    # the output is a mean of the values' rows: their gradient is the number of queries each row serves
    # weighted by the probabilities, summing to the 3 queries over the 3 keys
    np.testing.assert_allclose(g[..., 4:].sum(axis=1), np.full((1, 2), 3.0))


@pytest.mark.parametrize(("args", "error", "message"), [
    (((2, 3, 12), 0), ValueError, "n_head must be a positive int, got 0"),
    (((2, 3, 12), 2.0), ValueError, "n_head must be a positive int, got 2.0"),
    (((2, 3, 12), True), ValueError, "n_head must be a positive int, got True"),
    (((2, 3, 10), 2), ops.OpError, r"qkv of shape \(2, 3, 10\) must be \(..., T, 3C\) with 3C a positive multiple "
                                   r"of 3 x n_head = 6"),
    (((12,), 1), ops.OpError, r"qkv of shape \(12,\)"),
    (((2, 3, 0), 1), ops.OpError, "positive multiple"),
])
def test_bad_shapes_and_head_counts_are_refused(args, error, message) -> None:
    shape, n_head = args
    with pytest.raises(error, match=message):
        F.packed_qkv_attention(mta.tensor(np.zeros(shape, np.float32)), n_head)


def test_bad_masks_and_dropout_are_refused_naming_the_op() -> None:
    qkv = mta.tensor(np.zeros((2, 3, 12), np.float32))
    with pytest.raises(ops.OpError, match=r"packed_qkv_attention: attn_mask of shape \(4, 4\) does not broadcast to "
                                          r"the scores' shape \(2, 2, 3, 3\)"):
        F.packed_qkv_attention(qkv, 2, attn_mask=np.ones((4, 4), bool))
    with pytest.raises(ValueError, match=r"packed_qkv_attention: give attn_mask or is_causal=True, not both"):
        F.packed_qkv_attention(qkv, 2, attn_mask=np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(ValueError, match=r"packed_qkv_attention: dropout_p must be in \[0, 1\), got 1.0"):
        F.packed_qkv_attention(qkv, 2, dropout_p=1.0)


def test_the_models_attention_is_one_step_of_the_replayed_program() -> None:
    from minitorch_accum.accum import Accumulator
    from minitorch_accum.models import CharTransformer, TransformerConfig

    model = CharTransformer(TransformerConfig(11, 8, 2, 2, 16))
    rng = np.random.default_rng(9)
    acc = Accumulator(model, steps=2)
    step = acc.capture(lambda x, y: F.cross_entropy(model(x), y, reduction="sum"))
    for _ in range(2):
        x = mta.tensor(rng.integers(0, 11, (3, 8)))
        acc.backward(step(x, mta.tensor(rng.integers(0, 11, (3, 8)))), num_items=24)
    program = next(iter(step._entries.values())).program
    names = [s.fn.__name__ for s in program.steps]
    # no split, head views or merge around the two attentions; the one Permute is the tied head's table
    assert names.count("PackedQKVAttention") == 2 and "GetItem" not in names and names.count("Permute") == 1
    assert len(names) == 28, names  # 50 steps a micro-batch before (the char model's, 2 layers)


def test_a_head_count_that_does_not_divide_the_width_is_refused() -> None:
    with pytest.raises(ops.OpError, match=r"qkv of shape \(2, 3, 18\) must be .* 3 x n_head = 12"):
        F.packed_qkv_attention(mta.tensor(np.zeros((2, 3, 18), np.float32)), 4)


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, False), (False, False, True),
                                   (True, True, False)])
def test_attention_computes_the_gradients_asked_for_and_only_them(needs: tuple[bool, bool, bool]) -> None:
    rng = np.random.default_rng(12)
    arrays = [rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3)]
    tensors = [mta.tensor(a, requires_grad=need) for a, need in zip(arrays, needs, strict=True)]
    grads = F.scaled_dot_product_attention(*tensors, is_causal=True).sum().backward()
    reference = [mta.tensor(a, requires_grad=True) for a in arrays]
    expected = F.scaled_dot_product_attention(*reference, is_causal=True).sum().backward()
    for t, r, need in zip(tensors, reference, needs, strict=True):
        if need:
            np.testing.assert_array_equal(grads[t], expected[r])
        else:
            assert t not in grads
    from minitorch_accum.backend.numpy_backend import NumpyBackend
    from minitorch_accum.ops.attention import attention_backward

    ctx = ops.Context(NumpyBackend(), needs)
    ops.ScaledDotProductAttention.forward(ctx, *arrays, scale=0.5, bias=None)
    got = attention_backward(ctx, np.ones((2, 3, 4), np.float32), *needs)
    assert [g is not None for g in got] == list(needs)

"""Losses and functional forms of the layers.

``cross_entropy`` and ``mse_loss`` take ``reduction="mean" | "sum" | "none"``. For
gradient accumulation the exact rule is to sum per micro-batch and divide by the
number of items in the whole window (see ``minitorch_accum.accum``); ``"mean"``
here is the mean over the items of *this* call.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from minitorch_accum import ops
from minitorch_accum.autodiff import Tensor, apply, gelu, log_softmax, relu, sigmoid, softmax, tanh
from minitorch_accum.autodiff.operands import check_binary
from minitorch_accum.ops.function import OpError
from minitorch_accum.ops.matmul import matmul_shape

__all__ = [
    "LOSS_REDUCTIONS",
    "REDUCTIONS",
    "batch_norm",
    "count_items",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "layer_norm",
    "linear",
    "log_softmax",
    "mse_loss",
    "packed_qkv_attention",
    "relu",
    "scaled_dot_product_attention",
    "sigmoid",
    "softmax",
    "tanh",
]

#: how a loss reduces its per-item values (not how a window normalizes its gradient: that is
#: ``minitorch_accum.accum.WINDOW_REDUCTIONS``)
LOSS_REDUCTIONS = ("mean", "sum", "none")
REDUCTIONS = LOSS_REDUCTIONS  # its name before it said which


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in LOSS_REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(LOSS_REDUCTIONS)}, got {reduction!r}")


def _target_array(targets: Any, like: Tensor, op: str) -> Any:
    data = targets.data if isinstance(targets, Tensor) else like.backend.asarray(targets)
    if isinstance(targets, Tensor) and targets.device != like.device:
        raise ValueError(f"{op}: logits are on {like.device} but targets on {targets.device}")
    if data.dtype.kind not in "iu":
        raise TypeError(f"{op}: targets must be integer class ids, got dtype {data.dtype.name}")
    return data


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight + bias`` with weight of shape (in, out), as Burn stores it.

    PyTorch's ``F.linear`` takes an (out, in) weight; pass such a weight (an Embedding's
    table for a tied head, a converted PyTorch weight) as ``weight.mT``."""
    if weight.ndim != 2 or not _fits_matmul(x, weight):
        hint = ""
        if weight.ndim == 2 and x.ndim and weight.shape[1] == x.shape[-1]:
            hint = ("; weights here are (in, out) (y = x @ W + b, Burn's layout): for a PyTorch-layout "
                    "(out, in) weight such as an Embedding's table write F.linear(x, weight.mT)")
        raise OpError(f"linear: weight of shape {weight.shape} does not fit input of shape {x.shape}: "
                      f"it needs shape ({x.shape[-1] if x.ndim else '?'}, out){hint}")
    if isinstance(bias, Tensor) and _one_linear_op(x, weight, bias):
        return apply(ops.Linear, x, weight, bias)
    out = x @ weight
    return out if bias is None else out + bias


def _one_linear_op(x: Tensor, weight: Tensor, bias: Tensor) -> bool:
    """Whether ``x @ weight + bias`` can be the one Linear op (a GEMM that adds the bias): a bias
    tensor of the output's width, tensors on one device, and one dtype whose product is rounded
    once (float32, float64). Elsewhere (an array, a 1-D x, a bias that broadcasts otherwise, a
    number, 16-bit floats, whose NumPy products come back in float32) the MatMul and Add ops,
    as before."""
    return (isinstance(x, Tensor) and isinstance(weight, Tensor) and x.ndim >= 2 and bias.ndim == 1
            and bias.shape[0] == weight.shape[1] and x.dtype == weight.dtype == bias.dtype and x.dtype in _LINEAR_DTYPES
            and bias.device == x.device == weight.device)


_LINEAR_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fits_matmul(x: Tensor, weight: Tensor) -> bool:
    """Whether ``x @ weight`` is defined, by the one statement of matmul's shape rules."""
    try:
        matmul_shape("linear", x.shape, weight.shape)
    except OpError:
        return False
    return True


def cross_entropy(logits: Tensor, targets: Any, reduction: str = "mean", ignore_index: int = -100) -> Tensor:
    """Cross entropy of logits (..., C) against integer targets (...).

    Targets equal to ``ignore_index`` (padding) contribute nothing; ``"mean"`` divides
    by the number of targets that are not ignored.
    """
    _check_reduction("cross_entropy", reduction)
    target = _target_array(targets, logits, "cross_entropy")
    if logits.ndim < 1 or tuple(target.shape) != logits.shape[:-1]:
        raise OpError(
            f"cross_entropy: logits of shape {logits.shape} need targets of shape {logits.shape[:-1]}, "
            f"got {tuple(target.shape)}"
        )
    per_item = apply(ops.CrossEntropy, logits, targets=target, ignore_index=ignore_index)
    if reduction == "none":
        return per_item
    total = per_item.sum()
    if reduction == "sum":
        return total
    return total / float(int((target != ignore_index).sum()))


def count_items(targets: Any, ignore_index: int = -100) -> int:
    """The number of targets that are not ``ignore_index``: the ``num_items`` of a micro-batch."""
    data = targets.data if isinstance(targets, Tensor) else np.asarray(targets)
    return int((data != ignore_index).sum())


def mse_loss(prediction: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error; shapes must match exactly (no silent broadcasting)."""
    _check_reduction("mse_loss", reduction)
    if not isinstance(target, Tensor):
        target = Tensor(prediction.backend.asarray(target, dtype=prediction.dtype), _backend=prediction.backend)
    if target.shape != prediction.shape:
        raise OpError(f"mse_loss: prediction has shape {prediction.shape} but target has {target.shape}")
    check_binary("mse_loss", prediction, target)
    diff = prediction - target
    squared = diff * diff
    if reduction == "none":
        return squared
    return squared.sum() if reduction == "sum" else squared.mean()


def layer_norm(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """Normalize the last axis (biased variance), then scale and shift.

    ``layer_norm(x, weight, bias, eps=1e-5)``, or PyTorch's ``layer_norm(x, normalized_shape,
    weight=None, bias=None, eps=1e-5)`` (recognized by the shape; it must be the last axis).
    A missing weight scales by 1, a missing bias shifts by 0.
    """
    if (args and isinstance(args[0], tuple | list | int)) or "normalized_shape" in kwargs:
        shape, weight, bias, eps = _pytorch_layer_norm_arguments(*args, **kwargs)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if shape != x.shape[-1:]:
            raise OpError(f"layer_norm: normalizes the last axis only; normalized_shape {shape} does not match "
                          f"the last axis of input shape {x.shape}")
    else:
        weight, bias, eps = _layer_norm_arguments(*args, **kwargs)
    d = x.shape[-1] if x.ndim else 0
    backend = x.backend
    if weight is None:
        weight = Tensor(backend.xp.ones(d, dtype=x.dtype), _backend=backend)
    if bias is None:
        bias = Tensor(backend.xp.zeros(d, dtype=x.dtype), _backend=backend)
    if weight.shape != (d,) or bias.shape != (d,):
        raise OpError(
            f"layer_norm: input of shape {x.shape} needs weight and bias of shape ({d},), "
            f"got {weight.shape} and {bias.shape}"
        )
    check_binary("layer_norm", x, weight)
    return apply(ops.LayerNorm, x, weight, bias, eps=eps)


def _layer_norm_arguments(weight: Tensor | None = None, bias: Tensor | None = None,
                          eps: float = 1e-5) -> tuple[Tensor | None, Tensor | None, float]:
    return weight, bias, eps


def _pytorch_layer_norm_arguments(normalized_shape: Any, weight: Tensor | None = None, bias: Tensor | None = None,
                                  eps: float = 1e-5) -> tuple[Any, Tensor | None, Tensor | None, float]:
    return normalized_shape, weight, bias, eps


def batch_norm(x: Tensor, weight: Tensor, bias: Tensor, running_mean: Any, running_var: Any,
               training: bool, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalization of (N, C) or (N, C, L) input over every axis but C."""
    if x.ndim not in (2, 3):
        raise OpError(f"batch_norm: expects input of shape (N, C) or (N, C, L), got {x.shape}")
    c = x.shape[1]
    if weight.shape != (c,) or bias.shape != (c,):
        raise OpError(f"batch_norm: {c} channels need weight and bias of shape ({c},)")
    if training and x.size // c < 2:
        raise OpError(f"batch_norm: training needs more than one value per channel, got input {x.shape}")
    return apply(ops.BatchNorm, x, weight, bias, running_mean=running_mean, running_var=running_var,
                 training=training, momentum=momentum, eps=eps)


def embedding(ids: Any, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) for integer ``ids`` of any shape."""
    return apply(ops.Embedding, weight, ids=_target_array(ids, weight, "embedding"))


def dropout(x: Tensor, p: float = 0.5, training: bool = True, rng: np.random.Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p); identity when
    not training. The mask is drawn on the host from the seeded generator (``rng``, else the
    library's), by the op itself."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    return apply(ops.Dropout, x, p=p, rng=rng)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 rng: np.random.Generator | None = None) -> Tensor:
    """softmax(q k^T scale + mask) v over (..., L, E), (..., S, E), (..., S, Ev), as PyTorch's.

    ``attn_mask``: bool (True where a query may attend, as PyTorch) or float (added to the
    scores), broadcastable to (..., L, S); ``is_causal`` masks keys after each query (top-left
    aligned; not together with ``attn_mask``); ``scale`` defaults to 1/sqrt(E); ``dropout_p``
    drops attention probabilities with a mask from the seeded generator (or ``rng``). One fused
    op: only the probabilities are kept for backward.
    """
    for t in (key, value):
        if t.device != query.device or t.dtype != query.dtype:
            raise TypeError(f"scaled_dot_product_attention: query is {query.dtype.name} on {query.device} but "
                            f"another input is {t.dtype.name} on {t.device}")
    if query.ndim < 2 or key.ndim != query.ndim or value.ndim != query.ndim \
            or query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise OpError(f"scaled_dot_product_attention: query {query.shape}, key {key.shape} and value {value.shape} "
                      "must be (..., L, E), (..., S, E) and (..., S, Ev)")
    bias = _attention_bias("scaled_dot_product_attention", query, query.shape[:-2] + (query.shape[-2], key.shape[-2]),
                           attn_mask, dropout_p, is_causal)
    return apply(ops.ScaledDotProductAttention, query, key, value,
                 scale=1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale),
                 bias=bias, dropout_p=dropout_p, rng=rng)


def packed_qkv_attention(qkv: Tensor, n_head: int, attn_mask: Any = None, dropout_p: float = 0.0,
                         is_causal: bool = False, scale: float | None = None,
                         rng: np.random.Generator | None = None) -> Tensor:
    """Multi-head self-attention over ``qkv`` (..., T, 3C), a qkv Linear's output: the result of
    ``q, k, v = qkv.split(C, dim=-1)``, each viewed as ``n_head`` heads (..., H, T, C/H),
    ``scaled_dot_product_attention`` (the same ``attn_mask``, ``dropout_p``, ``is_causal``,
    ``scale`` and ``rng``), and the heads merged back into (..., T, C). One op
    (``ops.PackedQKVAttention``) instead of twelve: the same values; its backward writes the
    three gradients into one array instead of summing three zero-padded ones."""
    if not isinstance(n_head, int) or isinstance(n_head, bool) or n_head < 1:
        raise ValueError(f"packed_qkv_attention: n_head must be a positive int, got {n_head!r}")
    if qkv.ndim < 2 or qkv.shape[-1] % (3 * n_head) or qkv.shape[-1] == 0:
        raise OpError(f"packed_qkv_attention: qkv of shape {qkv.shape} must be (..., T, 3C) with 3C a positive "
                      f"multiple of 3 x n_head = {3 * n_head}")
    length = qkv.shape[-2]
    head = qkv.shape[-1] // (3 * n_head)
    bias = _attention_bias("packed_qkv_attention", qkv, qkv.shape[:-2] + (n_head, length, length), attn_mask,
                           dropout_p, is_causal)
    return apply(ops.PackedQKVAttention, qkv, n_head=n_head,
                 scale=1.0 / math.sqrt(head) if scale is None else float(scale), bias=bias, dropout_p=dropout_p,
                 rng=rng)


def _attention_bias(op: str, like: Tensor, scores: tuple[int, ...], attn_mask: Any, dropout_p: float,
                    is_causal: bool) -> Any:
    """The array added to the scaled scores (of shape ``scores``): 0 where a query may look and
    -inf elsewhere for a bool mask or ``is_causal``, a float mask as given; None without a mask."""
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1), got {dropout_p}")
    length, source = scores[-2:]
    backend, dtype = like.backend, like.dtype
    xp = backend.xp
    if is_causal:
        if attn_mask is not None:
            raise ValueError(f"{op}: give attn_mask or is_causal=True, not both")
        attn_mask = xp.tri(length, source, dtype=bool)
    if attn_mask is None:
        return None
    mask = attn_mask.data if isinstance(attn_mask, Tensor) else backend.asarray(attn_mask)
    try:
        np.broadcast_shapes(tuple(mask.shape), scores)
    except ValueError:
        raise OpError(f"{op}: attn_mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                      f"{scores}") from None
    if mask.dtype == np.bool_:
        return xp.where(mask, dtype.type(0), dtype.type(-math.inf))
    return mask.astype(dtype, copy=False)

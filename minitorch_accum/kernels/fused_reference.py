"""NumPy reference of the fused layer kernels, with the native module's signatures.

Each function makes the checks of ``fused_checks`` and computes what its native twin does,
one operation at a time in the stored dtype (float32 in float32, float64 in float64) and the
kernels' order (``fused_math``: our exp, log, erf and normal distribution, the lane order of a
row's sums, the chunk order of LayerNorm's column sums), so every path gives the same bits.
The row statistics kept for a backward (LayerNorm's mean and rstd, the log-sum-exp) are
float64 arrays whatever the dtype. ``reference`` re-exports them.
"""

from __future__ import annotations

import numpy as np

from minitorch_accum.kernels import arrays, fused_math
from minitorch_accum.kernels.catalog import CATALOG, FUSED
from minitorch_accum.kernels.fused_checks import FusedArgs, check_ids, check_targets
from minitorch_accum.kernels.validation import describe, real_number

#: the fused layer kernels, by the names every path gives them (fused.py's, the native module's): the
#: catalog's rows of the fused family, each of which has its body here
FUSED_KERNELS: tuple[str, ...] = tuple(k.name for k in CATALOG if k.family == FUSED)

__all__ = [
    "FUSED_KERNELS",
    "check_cross_entropy",
    "check_embedding",
    "check_gelu",
    "check_layer_norm_backward",
    "check_layer_norm_forward",
    "check_softmax",
    *FUSED_KERNELS,
]

# a host array, by the stub's name (these signatures are the stub's); the checks serve every path
Array = arrays.HostArray


def check_gelu(kernel: str, x: arrays.Array, grad: arrays.Array, out: arrays.Array) -> None:
    """The checks of gelu_forward (grad None) and gelu_backward, for every path."""
    roles = [("x", x, False)] + ([("grad", grad, False)] if kernel == "gelu_backward" else []) + [("out", out, True)]
    args = FusedArgs(kernel, roles, floats=[r for r, _, _ in roles])
    for role, _, _ in roles[1:]:
        args.shape(role, tuple(x.shape), "x")
    args.disjoint()


def gelu_forward(x: Array, out: Array, tanh: bool) -> None:
    """out = gelu(x), the erf form or (tanh) the tanh form."""
    check_gelu("gelu_forward", x, None, out)
    out[...] = fused_math.gelu(x, bool(tanh))


def gelu_backward(x: Array, grad: Array, out: Array, tanh: bool) -> None:
    """out = grad * gelu'(x)."""
    check_gelu("gelu_backward", x, grad, out)
    with np.errstate(all="ignore"):
        out[...] = grad * fused_math.gelu_derivative(x, bool(tanh))


def check_layer_norm_forward(x: arrays.Array, weight: arrays.Array, bias: arrays.Array, out: arrays.Array,
                             mean: arrays.Array, rstd: arrays.Array) -> None:
    """The checks of layer_norm_forward, for every path."""
    args = FusedArgs("layer_norm_forward", [("x", x, False), ("weight", weight, False), ("bias", bias, False),
                                            ("out", out, True), ("mean", mean, True), ("rstd", rstd, True)],
                     floats=["x", "weight", "bias", "out"], float64=["mean", "rstd"], optional=["weight", "bias"])
    args.axes("x", 2)
    rows, features = x.shape
    for role, shape in (("weight", (features,)), ("bias", (features,)), ("out", (rows, features)),
                        ("mean", (rows,)), ("rstd", (rows,))):
        args.shape(role, shape, "x")
    args.disjoint()


def layer_norm_forward(x: Array, weight: Array | None, bias: Array | None, eps: float, out: Array, mean: Array,
                       rstd: Array) -> None:
    """out = (x - mean) rstd weight + bias over the last axis of a 2-D x, in x's dtype; mean and
    rstd (float64 arrays, one per row) are kept for the backward. A missing weight is 1, a
    missing bias 0."""
    eps = real_number("layer_norm_forward", "eps", eps)
    check_layer_norm_forward(x, weight, bias, out, mean, rstd)
    rows, features = x.shape
    if rows == 0:
        return
    t = x.dtype.type
    with np.errstate(all="ignore"):
        mu = fused_math.lane_sums(x) / t(features)
        centered = x - mu[:, None]
        rs = t(1.0) / np.sqrt(fused_math.lane_sums(centered * centered) / t(features) + t(eps))
        w = t(1.0) if weight is None else weight
        b = t(-0.0) if bias is None else bias
        out[...] = (centered * rs[:, None]) * w + b
        mean[...] = mu
        rstd[...] = rs


def check_layer_norm_backward(x: arrays.Array, weight: arrays.Array, mean: arrays.Array, rstd: arrays.Array,
                              grad: arrays.Array, grad_x: arrays.Array, grad_weight: arrays.Array,
                              grad_bias: arrays.Array) -> None:
    """The checks of layer_norm_backward, for every path."""
    args = FusedArgs("layer_norm_backward",
                     [("x", x, False), ("weight", weight, False), ("mean", mean, False), ("rstd", rstd, False),
                      ("grad", grad, False), ("grad_x", grad_x, True), ("grad_weight", grad_weight, True),
                      ("grad_bias", grad_bias, True)],
                     floats=["x", "weight", "grad", "grad_x", "grad_weight", "grad_bias"], float64=["mean", "rstd"],
                     optional=["weight", "grad_x", "grad_weight", "grad_bias"])
    args.axes("x", 2)
    rows, features = x.shape
    for role, shape in (("weight", (features,)), ("mean", (rows,)), ("rstd", (rows,)), ("grad", (rows, features)),
                        ("grad_x", (rows, features)), ("grad_weight", (features,)), ("grad_bias", (features,))):
        args.shape(role, shape, "x")
    args.disjoint()


def layer_norm_backward(x: Array, weight: Array | None, mean: Array, rstd: Array, grad: Array, grad_x: Array | None,
                        grad_weight: Array | None, grad_bias: Array | None) -> None:
    """The gradients of layer_norm_forward: each of grad_x, grad_weight and grad_bias that is given."""
    check_layer_norm_backward(x, weight, mean, rstd, grad, grad_x, grad_weight, grad_bias)
    rows, features = x.shape
    t = x.dtype.type
    with np.errstate(all="ignore"):
        mu, rs = mean.astype(x.dtype)[:, None], rstd.astype(x.dtype)[:, None]
        x_hat = (x - mu) * rs
        if grad_x is not None and rows:
            gw = grad * (t(1.0) if weight is None else weight)
            mean_gw = fused_math.lane_sums(gw) / t(features)
            mean_gw_x_hat = fused_math.lane_sums(gw * x_hat) / t(features)
            grad_x[...] = rs * ((gw - mean_gw[:, None]) - x_hat * mean_gw_x_hat[:, None])
        if grad_weight is not None:
            grad_weight[...] = fused_math.column_sums(grad * x_hat)
        if grad_bias is not None:
            grad_bias[...] = fused_math.column_sums(grad)


def check_cross_entropy(kernel: str, logits: arrays.Array, targets: arrays.Array, ignore_index: int,
                        roles: list[tuple[str, arrays.Array, bool]]) -> None:
    """The checks of cross_entropy_forward and _backward (``roles``: their arrays past the targets)."""
    args = FusedArgs(kernel, [("logits", logits, False), ("targets", targets, False), *roles],
                     floats=["logits", *(r for r, _, _ in roles if r in ("losses", "grad", "out"))],
                     float64=["lse"], int64=["targets"])
    args.axes("logits", 2)
    rows, classes = logits.shape
    if classes == 0:
        raise ValueError(f"{kernel}: {describe('logits', logits)} must have at least one class")
    for role, _, _ in [("targets", None, None), *roles]:
        args.shape(role, (rows, classes) if role == "out" else (rows,), "logits")
    args.disjoint()
    check_targets(kernel, targets, classes, ignore_index)


def cross_entropy_forward(logits: Array, targets: Array, ignore_index: int, losses: Array, lse: Array) -> int:
    """losses[i] = logsumexp(logits[i]) - logits[i, targets[i]], 0 where targets[i] == ignore_index;
    lse[i] = logsumexp(logits[i]) (computed in the logits' dtype, kept in a float64 array for the
    backward). Returns the items not ignored."""
    check_cross_entropy("cross_entropy_forward", logits, targets, ignore_index,
                         [("losses", losses, True), ("lse", lse, True)])
    rows = logits.shape[0]
    if rows == 0:
        return 0
    valid = targets != ignore_index
    with np.errstate(all="ignore"):
        shift = fused_math.softmax_shift(np.fmax.reduce(logits, axis=1))
        row_lse = shift + fused_math.log_sum(fused_math.lane_sums(fused_math.softmax_exp(logits - shift[:, None])))
        lse[...] = row_lse
        picked = logits[np.arange(rows), np.where(valid, targets, 0)]
        losses[...] = np.where(valid, row_lse - picked, logits.dtype.type(0))
    return int(valid.sum())


def cross_entropy_backward(logits: Array, targets: Array, ignore_index: int, lse: Array, grad: Array,
                           out: Array) -> None:
    """out = grad[i] (softmax(logits[i]) - one_hot(targets[i])), 0 on ignored rows (grad: one per item)."""
    check_cross_entropy("cross_entropy_backward", logits, targets, ignore_index,
                         [("lse", lse, False), ("grad", grad, False), ("out", out, True)])
    rows, classes = logits.shape
    if rows == 0:
        return
    valid = targets != ignore_index
    with np.errstate(all="ignore"):
        w = np.where(valid, grad, logits.dtype.type(0))[:, None]
        d = w * fused_math.softmax_exp(logits - lse.astype(logits.dtype)[:, None])
        target = valid[:, None] & (np.arange(classes)[None, :] == targets[:, None])
        out[...] = np.where(target, d - w, d)


def check_embedding(ids: arrays.Array, grad: arrays.Array, out: arrays.Array) -> None:
    """The checks of embedding_backward, for every path."""
    args = FusedArgs("embedding_backward", [("ids", ids, False), ("grad", grad, False), ("out", out, True)],
                     floats=["grad", "out"], int64=["ids"])
    args.axes("ids", 1)
    args.axes("grad", 2)
    args.axes("out", 2)
    args.shape("grad", (ids.shape[0], out.shape[1]), "out")
    args.disjoint()
    check_ids("embedding_backward", ids, out.shape[0])


def embedding_backward(ids: Array, grad: Array, out: Array) -> None:
    """out = 0, then out[ids[i]] += grad[i] for each i in order (a row per id: the table's gradient)."""
    check_embedding(ids, grad, out)
    out[...] = 0
    np.add.at(out, ids, grad)


def check_softmax(kernel: str, x: arrays.Array, other: arrays.Array, out: arrays.Array) -> None:
    """The checks of softmax_forward (``other``: the bias) and softmax_backward (``other``: the
    gradient; ``x``: the probabilities), for every path."""
    forward = kernel == "softmax_forward"
    first, second = ("x", "bias") if forward else ("probs", "grad")
    args = FusedArgs(kernel, [(first, x, False), (second, other, False), ("out", out, True)],
                     floats=[first, second, "out"], optional=["bias"])
    args.axes(first, 2)
    rows, columns = x.shape
    if forward and other is not None:
        args.axes("bias", 2)
        args.shape("bias", (other.shape[0], columns), "x")
        if other.shape[0] == 0 or rows % other.shape[0]:
            raise ValueError(f"{kernel}: {describe('x', x)} has {rows} rows, not a multiple of the rows of "
                             f"{describe('bias', other)}")
    elif not forward:
        args.shape("grad", (rows, columns), "probs")
    args.shape("out", (rows, columns), first)
    args.disjoint()


def softmax_forward(x: Array, bias: Array | None, scale: float, out: Array) -> None:
    """out = softmax(x scale + bias) over each row of a 2-D x, in x's dtype; row r adds the bias's
    row r % its rows (None: no bias)."""
    scale = real_number("softmax_forward", "scale", scale)
    check_softmax("softmax_forward", x, bias, out)
    rows, columns = x.shape
    if rows == 0 or columns == 0:
        return
    t = x.dtype.type
    with np.errstate(all="ignore"):
        b = np.full((1, columns), t(-0.0)) if bias is None else bias
        scores = x * t(scale) + np.tile(b, (rows // b.shape[0], 1))
        shift = fused_math.softmax_shift(np.fmax.reduce(scores, axis=1))
        e = fused_math.softmax_exp(scores - shift[:, None])
        out[...] = e * (t(1.0) / fused_math.lane_sums(e))[:, None]


def softmax_backward(probs: Array, grad: Array, scale: float, out: Array) -> None:
    """out = probs (grad - sum(grad probs)) scale over each row: the gradient of softmax_forward's x."""
    scale = real_number("softmax_backward", "scale", scale)
    check_softmax("softmax_backward", probs, grad, out)
    if probs.size == 0:
        return
    t = probs.dtype.type
    with np.errstate(all="ignore"):
        dot = fused_math.lane_sums(grad * probs)
        out[...] = (probs * (grad - dot[:, None])) * t(scale)

"""The cases of the op-level benchmark: for each op, the variants timed side by side.

Variant names are ``<side>_<direction>``: ``ours`` (the fused kernel the op calls), ``torch``
(the ATen op PyTorch's autograd runs for it), ``numpy`` (the NumPy form the op used before the
kernel). Every variant of a case reads the same data, float32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from benchmarks.layer_ops.settings import Settings
from minitorch_accum import kernels as K
from minitorch_accum.backend import backend_for
from minitorch_accum.backend.blas import find_gemm, weight_gradient_blocks

__all__ = ["Case", "fused_cases", "gemm_cases"]

_SQRT_HALF = 0.7071067811865476


@dataclass(frozen=True)
class Case:
    name: str
    shape: str
    variants: dict[str, Callable[[], Any]]
    target: bool  # checked against TARGET_RATIO (forward + backward)


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _gelu(settings: Settings, torch: Any, approximate: str) -> Case:
    x, g = _data((settings.rows, settings.hidden), 1), _data((settings.rows, settings.hidden), 2)
    variants: dict[str, Callable[[], Any]] = {
        "ours_forward": lambda: K.gelu_forward(x, approximate),
        "ours_backward": lambda: K.gelu_backward(x, g, approximate),
    }
    if approximate == "none":
        variants["numpy_forward"] = lambda: x * (0.5 * (1.0 + special.erf(x * _SQRT_HALF)))
        variants["numpy_backward"] = lambda: g * (0.5 * (1.0 + special.erf(x * _SQRT_HALF))
                                                  + x * (0.3989422804014327 * np.exp(-0.5 * x * x)))
    if torch is not None:
        tx, tg = torch.from_numpy(x), torch.from_numpy(g)
        variants["torch_forward"] = lambda: torch.nn.functional.gelu(tx, approximate=approximate)
        variants["torch_backward"] = lambda: torch.ops.aten.gelu_backward(tg, tx, approximate=approximate)
    return Case(f"gelu ({approximate})", f"{settings.rows} x {settings.hidden}", variants, approximate == "none")


def _layer_norm(settings: Settings, torch: Any) -> Case:
    shape = (settings.rows, settings.embd)
    x, g = _data(shape, 3) * 2 + 1, _data(shape, 4)
    w, b = _data((settings.embd,), 5), _data((settings.embd,), 6)
    _, mean, rstd = K.layer_norm_forward(x, w, b)

    def numpy_forward() -> Any:
        mu = x.mean(axis=-1, keepdims=True)
        c = x - mu
        r = 1.0 / np.sqrt((c * c).mean(axis=-1, keepdims=True) + 1e-5)
        return c * r * w + b, r

    x_hat, r = (x - x.mean(-1, keepdims=True)) * rstd[:, None].astype(np.float32), rstd[:, None].astype(np.float32)

    def numpy_backward() -> Any:
        gw = g * w
        dx = r * (gw - gw.mean(-1, keepdims=True) - x_hat * (gw * x_hat).mean(-1, keepdims=True))
        return dx, (g * x_hat).sum(0), g.sum(0)

    variants: dict[str, Callable[[], Any]] = {
        "ours_forward": lambda: K.layer_norm_forward(x, w, b),
        "ours_backward": lambda: K.layer_norm_backward(x, w, mean, rstd, g),
        "numpy_forward": numpy_forward,
        "numpy_backward": numpy_backward,
    }
    if torch is not None:
        tx, tg, tw, tb = (torch.from_numpy(a) for a in (x, g, w, b))
        _, tmean, trstd = torch.native_layer_norm(tx, (settings.embd,), tw, tb, 1e-5)
        mask = [True, True, True]
        variants["torch_forward"] = lambda: torch.native_layer_norm(tx, (settings.embd,), tw, tb, 1e-5)
        variants["torch_backward"] = lambda: torch.ops.aten.native_layer_norm_backward(
            tg, tx, (settings.embd,), tmean, trstd, tw, tb, mask)
    return Case("layer_norm", f"{shape[0]} x {shape[1]}", variants, True)


def _cross_entropy(settings: Settings, torch: Any) -> Case:
    logits = _data((settings.rows, settings.vocab), 7) * 3
    targets = np.random.default_rng(8).integers(0, settings.vocab, settings.rows)
    targets[::16] = -100
    per_item = np.full(settings.rows, 1.0 / settings.rows, np.float32)
    _, lse, _ = K.cross_entropy_forward(logits, targets)
    valid = targets != -100
    safe = np.where(valid, targets, 0)

    def numpy_forward() -> Any:
        m = logits.max(-1, keepdims=True)
        log_probs = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
        return np.where(valid, -log_probs[np.arange(settings.rows), safe], 0), log_probs

    log_probs = numpy_forward()[1]

    def numpy_backward() -> Any:
        weight = (per_item * valid).astype(np.float32)
        out = np.exp(log_probs) * weight[:, None]
        out[np.arange(settings.rows), safe] -= weight
        return out

    variants: dict[str, Callable[[], Any]] = {
        "ours_forward": lambda: K.cross_entropy_forward(logits, targets),
        "ours_backward": lambda: K.cross_entropy_backward(logits, targets, lse, per_item),
        "numpy_forward": numpy_forward,
        "numpy_backward": numpy_backward,
    }
    if torch is not None:
        tl, tt, tgrad = torch.from_numpy(logits), torch.from_numpy(targets), torch.from_numpy(per_item)
        tlogp = torch.log_softmax(tl, 1)
        total = torch.tensor(float(valid.sum()))

        def torch_backward() -> Any:
            grad_logp = torch.ops.aten.nll_loss_backward(tgrad, tlogp, tt, None, 0, -100, total)
            return torch.ops.aten._log_softmax_backward_data(grad_logp, tlogp, 1, torch.float32)

        variants["torch_forward"] = lambda: torch.nn.functional.cross_entropy(tl, tt, reduction="none")
        variants["torch_backward"] = torch_backward
    return Case("cross_entropy", f"{settings.rows} x {settings.vocab}", variants, True)


def _embedding(settings: Settings, torch: Any) -> Case:
    ids = np.random.default_rng(9).integers(0, settings.vocab, settings.rows)
    g = _data((settings.rows, settings.embd), 10)

    def numpy_backward() -> Any:
        out = np.zeros((settings.vocab, settings.embd), np.float32)
        np.add.at(out, ids, g)
        return out

    variants: dict[str, Callable[[], Any]] = {
        "ours_backward": lambda: K.embedding_backward(ids, g, settings.vocab),
        "numpy_backward": numpy_backward,
    }
    if torch is not None:
        tids, tg = torch.from_numpy(ids), torch.from_numpy(g)
        variants["torch_backward"] = lambda: torch.ops.aten.embedding_dense_backward(tg, tids, settings.vocab, -1,
                                                                                     False)
    return Case("embedding backward", f"{settings.rows} ids, {settings.vocab} x {settings.embd}", variants, False)


def _attention_softmax(settings: Settings, torch: Any) -> Case:
    """The attention's softmax with its scale and causal mask: one row per query, (batch x heads x
    L) rows of S = L keys, the char transformer's b = 32, 4 heads, block 32 (a 32 x 32 block)."""
    length = 32
    scores = _data((settings.rows * 4, length), 15)
    g = _data((settings.rows * 4, length), 16)
    causal = np.where(np.tri(length, dtype=bool), 0.0, -np.inf).astype(np.float32)
    probs = K.softmax_forward(scores, causal, 0.25)
    full = np.tile(causal, (settings.rows * 4 // length, 1))

    def numpy_forward() -> Any:
        s = scores * np.float32(0.25) + full
        m = s.max(-1, keepdims=True)
        return np.exp(s - m - np.log(np.exp(s - m).sum(-1, keepdims=True)))

    variants: dict[str, Callable[[], Any]] = {
        "ours_forward": lambda: K.softmax_forward(scores, causal, 0.25),
        "ours_backward": lambda: K.softmax_backward(probs, g, 0.25),
        "numpy_forward": numpy_forward,
        "numpy_backward": lambda: probs * (g - (g * probs).sum(-1, keepdims=True)) * np.float32(0.25),
    }
    if torch is not None:
        ts, tg, tp, tmask = (torch.from_numpy(a) for a in (scores, g, probs, full))
        variants["torch_forward"] = lambda: torch.softmax(ts * 0.25 + tmask, -1)
        variants["torch_backward"] = lambda: torch.ops.aten._softmax_backward_data(tg, tp, -1, torch.float32) * 0.25
    return Case("softmax (attention)", f"{settings.rows * 4} rows of {length}, causal", variants, False)


def _matmul_3d(settings: Settings, torch: Any) -> Case:
    x = _data((32, settings.rows // 32, settings.embd), 11)
    w = _data((settings.embd, settings.hidden), 12)
    variants: dict[str, Callable[[], Any]] = {
        "ours_forward": lambda: backend_for("cpu").matmul(x.reshape(-1, x.shape[-1]), w).reshape(*x.shape[:-1],
                                                                                                  w.shape[1]),
        "numpy_forward": lambda: np.matmul(x, w),
    }
    if torch is not None:
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        variants["torch_forward"] = lambda: torch.matmul(tx, tw)
    return Case("matmul 3-D @ 2-D", f"{x.shape} @ {w.shape}", variants, False)


def fused_cases(settings: Settings, torch: Any) -> list[Case]:
    return [_gelu(settings, torch, "none"), _gelu(settings, torch, "tanh"), _layer_norm(settings, torch),
            _cross_entropy(settings, torch), _embedding(settings, torch), _attention_softmax(settings, torch),
            _matmul_3d(settings, torch)]


def gemm_cases(settings: Settings, torch: Any) -> list[Case]:
    """The weight-gradient GEMM out += a^T g into a buffer (the arena's beta = 1 write): the
    backend's (one call unless MTA_GEMM_K_BLOCK asks for K-blocks), the same BLAS in K-blocks
    of 256 with beta = 1, and PyTorch's (MKL)."""
    cases = []
    backend = backend_for("cpu")
    for k, m, n in settings.gemm_shapes:
        a, g = _data((k, m), 13), _data((k, n), 14)
        out = np.zeros((m, n), np.float32)
        gemm = find_gemm(out.dtype)
        variants: dict[str, Callable[[], Any]] = {
            "ours_gemm": lambda a=a, g=g, out=out: backend.gemm_into(a.T, g, out, 1.0, 1.0)}
        if gemm is not None:
            def blocked(a=a, g=g, out=out, gemm=gemm, k=k) -> None:
                for start in range(0, k, 256):
                    gemm(out, a[start : start + 256], True, g[start : start + 256], False, 1.0, 1.0)

            variants["ours_k256"] = blocked
        if torch is not None:
            ta, tg, tout = torch.from_numpy(a), torch.from_numpy(g), torch.zeros(m, n)
            variants["torch_addmm"] = lambda ta=ta, tg=tg, tout=tout: tout.addmm_(ta.T, tg)
        blocks = weight_gradient_blocks(k, m, n)
        label = f"K = {k}, {m} x {n}" + (f", backend in {len(blocks)} K-blocks" if blocks else "")
        cases.append(Case("weight-gradient GEMM", label, variants, False))
    return cases

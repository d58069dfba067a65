"""A derived bound on how far a float32 (or bf16) window gradient may sit from the big batch's.

Both gradients are computations of the same exact value; each rounds differently
(micro-batch GEMMs against one GEMM, other BLAS paths for other batch shapes, the
window sum, the final scaling). This module bounds the error of *one* such
computation by a first-order running error analysis, evaluated in float64 for the
case's weights and data, and doubles it for the two sides:

* every dot product or sum of n terms errs by at most gamma_n * sum|terms|
  (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1),
  gamma_n = n u / (1 - n u), u the unit roundoff of the dtype;
* an error already present in an operand propagates through the products that
  use it (first order: |a| delta_b + delta_a |b|);
* tanh, GELU and ReLU are Lipschitz (constants 1, 1.13, 1) and their derivatives
  too (tanh'' <= 0.77, GELU'' <= 0.8); a ReLU whose input lies within its own error
  bound of zero may switch, costing the whole incoming gradient there;
* softmax's error is bounded by p (2 max_row delta_z + (C + 4) u).

The window adds k micro-batch sums (k u sum_j |G_j|) and scales once (u |G|). A
parameter used twice (a Linear applied twice, a Param shared by two layers) gets the
sum of its uses' bounds, gamma_uses over their contributions for adding them, and
k * uses terms in the window sum.
This layer-by-layer analysis covers Sequentials of Linear, ReLU/Tanh/GELU and Embedding:
LayerNorm's backward subtracts nearly equal terms when a row's variance approaches eps,
so its error depends on a conditioning this analysis does not model. Any other model
(a custom Module, LayerNorm included) gets the coarser bound of ``parameter_bound.py``,
found by walking its parameters and measuring its per-row gradients; training-mode
BatchNorm has no bound at all (the window is not the big batch's computation).
"""

from __future__ import annotations

import numpy as np

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn import GELU, Embedding, Linear, Module, ReLU, Sequential, Tanh
from minitorch_accum.nn import functional as F
from minitorch_accum.testing.cases import PAD, Case
from minitorch_accum.testing.parameter_bound import UNIT_ROUNDOFF, RowMagnitudes, parameter_walk_bound
from minitorch_accum.testing.subject import inexact_layers

__all__ = ["UNIT_ROUNDOFF", "rounding_bound"]

#: the layers the layer-by-layer analysis reads
_ANALYSED = (Linear, ReLU, Tanh, GELU, Embedding)


def _gamma(n: int, u: float) -> float:
    return n * u / (1.0 - n * u)


_GELU_C = np.sqrt(2.0 / np.pi)


def _activation(layer: Module, z: np.ndarray, dz_err: np.ndarray, u: float) -> tuple[np.ndarray, np.ndarray,
                                                                                    np.ndarray, float]:
    """(value, its error bound, derivative, bound on the second derivative)."""
    if isinstance(layer, ReLU):
        return np.maximum(z, 0.0), dz_err, (z > 0).astype(np.float64), 0.0
    if isinstance(layer, Tanh):
        t = np.tanh(z)
        return t, dz_err + 2 * u * np.abs(t), 1.0 - t * t, 0.77
    if isinstance(layer, GELU):
        if getattr(layer, "approximate", "none") == "tanh":
            t = np.tanh(_GELU_C * (z + 0.044715 * z**3))
            value = 0.5 * z * (1.0 + t)
            derivative = 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * z * z)
        else:  # the exact form z * Phi(z): its derivative Phi(z) + z phi(z), its second phi(z) (2 - z^2) <= 0.8
            from scipy.special import erf

            value = 0.5 * z * (1.0 + erf(z / np.sqrt(2.0)))
            derivative = 0.5 * (1.0 + erf(z / np.sqrt(2.0))) + z * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
        return value, 1.13 * dz_err + 10 * u * (np.abs(value) + np.abs(z)), derivative, 0.8
    raise ValueError(f"rounding_bound: no error model for {type(layer).__name__}")


def _single_computation(weights: dict[int, np.ndarray], layers: list[Module], x: np.ndarray, y: np.ndarray,
                        u: float, scale: float) -> tuple[dict[int, np.ndarray], dict[int, list[np.ndarray]]]:
    """Error bound, per parameter (by id), of one float computation of the normalized gradient,
    and every use's contribution to that gradient (float64), per parameter.

    ``layers`` is the order of application: a layer applied twice appears twice, and two
    layers may hold one Param; the contributions of a parameter's uses are added up in some
    order, costing gamma_uses * sum |contribution| more."""
    n_rows = y.size
    # ---------------------------------------------------------------- forward
    h = x
    h_err = np.zeros_like(x, dtype=np.float64)
    saved = []
    rows_index = None
    for layer in layers:
        if isinstance(layer, Embedding):
            table = weights[id(layer.weight)]
            rows_index = x.reshape(-1)
            h = table[x]
            h_err = u * np.abs(h)  # the table itself is stored rounded
            saved.append(("embedding", layer, table))
        elif isinstance(layer, Linear):
            w, b = weights[id(layer.weight)], weights[id(layer.bias)]
            fan = w.shape[0]
            z = h @ w + b
            z_err = _gamma(fan + 1, u) * (np.abs(h) @ np.abs(w) + np.abs(b)) + h_err @ np.abs(w)
            saved.append(("linear", layer, (h, h_err, w)))
            h, h_err = z, z_err
        else:
            value, err, derivative, curvature = _activation(layer, h, h_err, u)
            saved.append(("activation", layer, (h, h_err, derivative, curvature)))
            h, h_err = value, err
    logits, logits_err = h.reshape(-1, h.shape[-1]), h_err.reshape(-1, h.shape[-1])
    targets = y.reshape(-1)
    valid = (targets != PAD).astype(np.float64)[:, None]
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    classes = logits.shape[1]
    p_err = p * (2 * logits_err.max(axis=1, keepdims=True) + (classes + 4) * u)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(targets)), np.where(targets == PAD, 0, targets)] = 1.0
    dz = (p - onehot) * valid * scale
    dz_err = (p_err + u * np.abs(p - onehot)) * valid * scale
    dz = dz.reshape(h.shape)
    dz_err = dz_err.reshape(h.shape)
    # --------------------------------------------------------------- backward
    errors: dict[int, np.ndarray] = {}
    contributions: dict[int, list[np.ndarray]] = {}

    def add(param: object, error: np.ndarray, contribution: np.ndarray) -> None:
        errors[id(param)] = errors.get(id(param), 0.0) + error
        contributions.setdefault(id(param), []).append(contribution)

    for kind, layer, stored in reversed(saved):
        if kind == "linear":
            h_in, h_in_err, w = stored
            flat_h, flat_he = h_in.reshape(-1, w.shape[0]), h_in_err.reshape(-1, w.shape[0])
            flat_dz, flat_dze = dz.reshape(-1, w.shape[1]), dz_err.reshape(-1, w.shape[1])
            rows = flat_dz.shape[0]
            dw_err = _gamma(rows, u) * (np.abs(flat_h).T @ np.abs(flat_dz)) + flat_he.T @ np.abs(flat_dz) \
                + np.abs(flat_h).T @ flat_dze
            db_err = _gamma(rows, u) * np.abs(flat_dz).sum(axis=0) + flat_dze.sum(axis=0)
            add(layer.weight, dw_err, flat_h.T @ flat_dz)
            add(layer.bias, db_err, flat_dz.sum(axis=0))
            new_dz = dz @ w.T
            new_err = _gamma(w.shape[1], u) * (np.abs(dz) @ np.abs(w).T) + dz_err @ np.abs(w).T
            dz, dz_err = new_dz, new_err
        elif kind == "activation":
            z, z_err, derivative, curvature = stored
            ambiguous = (np.abs(z) <= z_err) if isinstance(layer, ReLU) else np.zeros(z.shape, bool)
            new_dz = dz * derivative
            new_err = dz_err * np.abs(derivative) + np.abs(dz) * curvature * z_err + 4 * u * np.abs(new_dz) \
                + np.abs(dz) * ambiguous
            dz, dz_err = new_dz, new_err
        else:  # embedding: rows of dz scatter-added into the table
            table = stored
            flat = dz.reshape(-1, table.shape[1])
            flat_err = dz_err.reshape(-1, table.shape[1])
            magnitude = np.zeros_like(table)
            propagated = np.zeros_like(table)
            gradient = np.zeros_like(table)
            np.add.at(magnitude, rows_index, np.abs(flat))
            np.add.at(propagated, rows_index, flat_err)
            np.add.at(gradient, rows_index, flat)
            add(layer.weight, _gamma(n_rows, u) * magnitude + propagated, gradient)
    for key, parts in contributions.items():
        if len(parts) > 1:  # a tied parameter: its uses' contributions are summed
            errors[key] = errors[key] + _gamma(len(parts), u) * sum(np.abs(c) for c in parts)
    return errors, contributions


def rounding_bound(case: Case, model: Module) -> dict[str, np.ndarray]:
    """Elementwise bound on |window - full batch| for ``case``'s data run through ``model``, by
    parameter name of ``model`` (any Module).

    A Sequential of the analysed layers, in order of application (a Linear applied twice
    appears twice; a Param shared by two layers is one parameter), gets the layer-by-layer
    analysis; any other model the parameter-walk bound (``parameter_bound.py``). A partial window
    is bounded by what it holds, ``len(case.sizes)`` micro-batches."""
    reasons = inexact_layers(model)
    if reasons:
        raise ValueError(f"rounding_bound: no bound holds, the window is not the big batch's computation: "
                         f"{'; '.join(reasons)}")
    if not (isinstance(model, Sequential) and all(isinstance(layer, _ANALYSED) for layer in model)):
        x, y = case.batch()

        def row_loss(rows: slice) -> tuple[Tensor, int]:
            return case.loss(model, x[rows], y[rows], "sum"), F.count_items(y[rows])

        magnitudes = RowMagnitudes.measure(model, row_loss, case.items)
        return parameter_walk_bound(magnitudes, len(case.sizes), case.dtype, case.reduction).bounds
    u = UNIT_ROUNDOFF[case.dtype]
    named = list(model.named_parameters())
    weights = {id(p): np.asarray(p.numpy(), dtype=np.float64) for _, p in named}
    layers = list(model)
    x, y = case.batch()
    items = int((y != PAD).sum())
    scale = 1.0 if case.reduction == "sum" else 1.0 / max(items, 1)
    errors, contributions = _single_computation(weights, layers, x, y, u, scale)
    total = {key: 2.0 * e for key, e in errors.items()}
    # the window's own arithmetic: k micro-batches of `uses` contributions each added into the
    # window (gamma_{k uses} over every term), then one scaling pass
    k = len(case.sizes)
    for part in case.slices():
        _, part_contributions = _single_computation(weights, layers, x[part], y[part], u, scale)
        for key, parts in part_contributions.items():
            total[key] = total[key] + k * len(parts) * u * sum(np.abs(c) for c in parts)
    for key, parts in contributions.items():
        total[key] = total[key] + u * np.abs(sum(parts))
    return {name: total[id(p)] for name, p in named}

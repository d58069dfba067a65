"""A two-layer MLP's gradients against formulas derived by hand and written in NumPy."""

from __future__ import annotations

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.nn import functional as F


def test_two_layer_mlp_gradients_match_hand_derived_formulas() -> None:
    rng = np.random.default_rng(0)
    n, d_in, d_hidden, classes = 7, 5, 6, 4
    model = nn.Sequential(nn.Linear(d_in, d_hidden, dtype="float64", rng=rng), nn.Tanh(),
                          nn.Linear(d_hidden, classes, dtype="float64", rng=rng))
    x = rng.normal(size=(n, d_in))
    y = rng.integers(0, classes, size=n)

    loss = F.cross_entropy(model(mta.tensor(x, dtype="float64")), y)
    grads = loss.backward()

    w1, b1 = model[0].weight.value, model[0].bias.value
    w2, b2 = model[2].weight.value, model[2].bias.value
    # forward
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    expected_loss = -np.log(p[np.arange(n), y]).mean()
    # backward: dL/dlogits = (softmax - onehot) / n
    d_logits = p.copy()
    d_logits[np.arange(n), y] -= 1.0
    d_logits /= n
    d_w2 = h.T @ d_logits
    d_b2 = d_logits.sum(axis=0)
    d_h = d_logits @ w2.T
    d_pre = d_h * (1.0 - h**2)
    d_w1 = x.T @ d_pre
    d_b1 = d_pre.sum(axis=0)

    np.testing.assert_allclose(loss.item(), expected_loss, rtol=1e-12)
    for param, expected in [(model[0].weight, d_w1), (model[0].bias, d_b1),
                            (model[2].weight, d_w2), (model[2].bias, d_b2)]:
        np.testing.assert_allclose(grads[param], expected, rtol=1e-10, atol=1e-14)

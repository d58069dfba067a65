"""The NumPy reference of the fused optimizer steps follows PyTorch's SGD and Adam(W) in
float64 (every other kernel path equals the reference bit for bit: tests/kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernels.kernel_cases import reference_step


@pytest.mark.oracle
@pytest.mark.parametrize("nesterov", [False, True])
def test_reference_sgd_follows_pytorch(nesterov):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    p = rng.standard_normal(50)
    buf = np.zeros(50)
    tp = torch.tensor(p.copy(), requires_grad=True)
    opt = torch.optim.SGD([tp], lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=nesterov)
    for step in range(5):
        g = rng.standard_normal(50)
        tp.grad = torch.tensor(g.copy())
        opt.step()
        reference_step(
            "sgd_momentum_step",
            p,
            g,
            buf,
            lr=0.1,
            momentum=0.9,
            weight_decay=0.01,
            nesterov=nesterov,
            first_step=step == 0,
        )
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.oracle
@pytest.mark.parametrize("decoupled", [True, False])
def test_reference_adamw_follows_pytorch(decoupled):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p = rng.standard_normal(50)
    m, v = np.zeros(50), np.zeros(50)
    tp = torch.tensor(p.copy(), requires_grad=True)
    kind = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = kind([tp], lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)
    for step in range(1, 6):
        g = rng.standard_normal(50)
        tp.grad = torch.tensor(g.copy())
        opt.step()
        reference_step(
            "adamw_step",
            p,
            g,
            m,
            v,
            lr=1e-2,
            beta1=0.9,
            beta2=0.99,
            eps=1e-8,
            weight_decay=0.05,
            step=step,
            decoupled=decoupled,
        )
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-10, atol=1e-12)

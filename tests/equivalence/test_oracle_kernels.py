"""The NumPy reference of the fused optimizer steps follows PyTorch's SGD and Adam(W) in
float64 (every other kernel path equals the reference bit for bit: tests/kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernels.kernel_cases import reference_step


def _five_steps_against_torch(seed: int, make_optimizer, our_step, rtol: float, atol: float) -> None:
    """Five steps of a torch optimizer (``make_optimizer(torch, [param])``) on a float64 parameter
    and ``our_step(p, g, step)`` (step 0 first) on a copy of it, on the same drawn gradients."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    p = rng.standard_normal(50)
    tp = torch.tensor(p.copy(), requires_grad=True)
    opt = make_optimizer(torch, [tp])
    for step in range(5):
        g = rng.standard_normal(50)
        tp.grad = torch.tensor(g.copy())
        opt.step()
        our_step(p, g, step)
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.oracle
@pytest.mark.parametrize("nesterov", [False, True])
def test_reference_sgd_follows_pytorch(nesterov):
    buf = np.zeros(50)

    def ours(p, g, step):
        reference_step("sgd_momentum_step", p, g, buf, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=nesterov,
                       first_step=step == 0)

    _five_steps_against_torch(
        0, lambda torch, params: torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=nesterov),
        ours, rtol=1e-12, atol=1e-14)


@pytest.mark.oracle
@pytest.mark.parametrize("decoupled", [True, False])
def test_reference_adamw_follows_pytorch(decoupled):
    m, v = np.zeros(50), np.zeros(50)

    def ours(p, g, step):
        reference_step("adamw_step", p, g, m, v, lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.05,
                       step=step + 1, decoupled=decoupled)

    def theirs(torch, params):
        kind = torch.optim.AdamW if decoupled else torch.optim.Adam
        return kind(params, lr=1e-2, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)

    _five_steps_against_torch(1, theirs, ours, rtol=1e-10, atol=1e-12)

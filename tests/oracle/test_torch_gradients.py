"""Optional oracle: the same small models and data in PyTorch give the same gradients.

Runs when the ``oracle`` extra (torch) is installed; skipped otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.nn import functional as F

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle


def torch_mlp(model: nn.Module, activation: str) -> torch.nn.Module:
    layers = []
    for layer in model:
        if isinstance(layer, nn.Linear):
            linear = torch.nn.Linear(layer.in_features, layer.out_features, dtype=torch.float64)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(layer.weight.numpy().T))  # torch stores (out, in)
                linear.bias.copy_(torch.from_numpy(layer.bias.numpy()))
            layers.append(linear)
        elif isinstance(layer, nn.LayerNorm):
            layers.append(torch.nn.LayerNorm(layer.d, eps=layer.eps, dtype=torch.float64))
        else:
            layers.append({"relu": torch.nn.ReLU(), "gelu": torch.nn.GELU(approximate="tanh"),
                           "tanh": torch.nn.Tanh()}[activation])
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("activation", ["relu", "gelu", "tanh"])
def test_mlp_gradients_match_pytorch(activation: str) -> None:
    rng = np.random.default_rng(0)
    act = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}[activation]
    model = nn.Sequential(nn.Linear(6, 12, dtype="float64", rng=rng), act(), nn.LayerNorm(12, dtype="float64"),
                          nn.Linear(12, 4, dtype="float64", rng=rng))
    reference = torch_mlp(model, activation)
    x = rng.normal(size=(9, 6))
    y = rng.integers(0, 4, size=9)
    grads = F.cross_entropy(model(mta.tensor(x, dtype="float64")), y).backward()
    loss = torch.nn.functional.cross_entropy(reference(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    ours = [grads[p] for p in model.parameters()]
    theirs = []
    for module in reference:
        if isinstance(module, torch.nn.Linear):
            theirs += [module.weight.grad.numpy().T, module.bias.grad.numpy()]
        elif isinstance(module, torch.nn.LayerNorm):
            theirs += [module.weight.grad.numpy(), module.bias.grad.numpy()]
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_padded_sequence_cross_entropy_matches_pytorch() -> None:
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(3, 5, 7))
    targets = rng.integers(0, 7, size=(3, 5))
    targets[0, 3:] = -100
    ours = mta.tensor(logits, dtype="float64", requires_grad=True)
    grads = F.cross_entropy(ours, targets).backward()
    theirs = torch.from_numpy(logits).requires_grad_()
    torch.nn.functional.cross_entropy(theirs.reshape(-1, 7), torch.from_numpy(targets).reshape(-1),
                                      ignore_index=-100).backward()
    np.testing.assert_allclose(grads[ours], theirs.grad.numpy(), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_optimizer_steps_match_pytorch(name: str) -> None:
    rng = np.random.default_rng(2)
    layer = nn.Linear(5, 3, dtype="float64", rng=rng)
    ref = torch.nn.Linear(5, 3, dtype=torch.float64)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(layer.weight.numpy().T))
        ref.bias.copy_(torch.from_numpy(layer.bias.numpy()))
    if name == "sgd":
        ours = optim.SGD(0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
        theirs = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01, nesterov=True)
    else:
        ours = optim.AdamW(lr=0.01, weight_decay=0.1)
        theirs = torch.optim.AdamW(ref.parameters(), lr=0.01, weight_decay=0.1)
    for _ in range(4):
        x = rng.normal(size=(8, 5))
        ours.step(layer, (layer(mta.tensor(x, dtype="float64")) ** 2).mean().backward())
        theirs.zero_grad()
        (ref(torch.from_numpy(x)) ** 2).mean().backward()
        theirs.step()
    np.testing.assert_allclose(layer.weight.numpy(), ref.weight.detach().numpy().T, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(layer.bias.numpy(), ref.bias.detach().numpy(), rtol=1e-10, atol=1e-13)

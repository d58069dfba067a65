"""Optional oracle: the same ops, small models and data in PyTorch give the same values and
gradients in float64 (the ops at their edge points too: ties, kinks, 0 ** 0).

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
            layers.append({"relu": torch.nn.ReLU(), "gelu": torch.nn.GELU(),
                           "gelu_tanh": torch.nn.GELU(approximate="tanh"), "tanh": torch.nn.Tanh()}[activation])
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "tanh"])
def test_mlp_gradients_match_pytorch(activation: str) -> None:
    rng = np.random.default_rng(0)
    act = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
           "tanh": nn.Tanh}[activation]
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


@pytest.mark.parametrize("name", ["sgd", "sgd_params", "adamw", "adamw_groups"])
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
    elif name == "sgd_params":
        ours = optim.SGD(layer.parameters(), lr=0.1, momentum=0.9, dampening=0.1)
        theirs = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, dampening=0.1)
    elif name == "adamw":
        ours = optim.AdamW(lr=0.01, weight_decay=0.1)
        theirs = torch.optim.AdamW(ref.parameters(), lr=0.01, weight_decay=0.1)
    else:
        ours = optim.AdamW([{"params": [layer.weight], "weight_decay": 0.1},
                            {"params": [layer.bias], "weight_decay": 0.0, "lr": 0.03}], lr=0.01, betas=(0.8, 0.9))
        theirs = torch.optim.AdamW([{"params": [ref.weight], "weight_decay": 0.1},
                                    {"params": [ref.bias], "weight_decay": 0.0, "lr": 0.03}], lr=0.01, betas=(0.8, 0.9))
    for _ in range(4):
        x = rng.normal(size=(8, 5))
        ours.step(layer, (layer(mta.tensor(x, dtype="float64")) ** 2).mean().backward())
        theirs.zero_grad()
        (ref(torch.from_numpy(x)) ** 2).mean().backward()
        theirs.step()
    np.testing.assert_allclose(layer.weight.numpy(), ref.weight.detach().numpy().T, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(layer.bias.numpy(), ref.bias.detach().numpy(), rtol=1e-10, atol=1e-13)


def both(values: np.ndarray) -> tuple[mta.Tensor, torch.Tensor]:
    """The same float64 values as a leaf here and a leaf in PyTorch."""
    return (mta.tensor(values, dtype="float64", requires_grad=True),
            torch.tensor(values, dtype=torch.float64, requires_grad=True))


def compare(ours: mta.Tensor, theirs: torch.Tensor, leaves: list[tuple[mta.Tensor, torch.Tensor]],
            weights: np.ndarray | None = None) -> None:
    """Values, and the gradients of sum(out * weights) for every leaf pair, agree to 1e-12."""
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-14)
    w = np.random.default_rng(99).normal(size=ours.shape) if weights is None else weights
    grads = (ours * w).sum().backward()
    (theirs * torch.from_numpy(np.asarray(w, dtype=np.float64))).sum().backward()
    for mine, reference in leaves:
        expected = reference.grad.numpy()
        got = np.asarray(grads.get(mine, np.zeros(mine.shape)))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)


# inputs with ties, kinks and exact zeros, where PyTorch's subgradient choices show
EDGES = np.array([[-2.0, -1.0, 0.0, 0.0, 1.0], [1.0, 2.0, 2.0, -0.5, 3.0]])

UNARY_OPS = {
    "gelu": (lambda x: x.gelu(), lambda t: torch.nn.functional.gelu(t)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
    "abs": (lambda x: abs(x), torch.abs),
    "clamp": (lambda x: x.clamp(min=-1.0, max=2.0), lambda t: t.clamp(min=-1.0, max=2.0)),
    "clamp_min": (lambda x: x.clamp(min=0.0), lambda t: t.clamp(min=0.0)),
    "rsqrt": (lambda x: (x.abs() + 0.5).rsqrt(), lambda t: (t.abs() + 0.5).rsqrt()),
    "square": (lambda x: x.square(), torch.square),
    "pow_zero": (lambda x: x**0, lambda t: t**0),
    "pow_two": (lambda x: x**2, lambda t: t**2),
    "var": (lambda x: x.var(dim=1, keepdim=True), lambda t: t.var(dim=1, keepdim=True)),
    "var_biased": (lambda x: x.var(0, unbiased=False), lambda t: t.var(0, unbiased=False)),
    "var_correction": (lambda x: x.var(correction=2), lambda t: t.var(correction=2)),
    "max_dim": (lambda x: x.max(dim=1).values, lambda t: t.max(dim=1).values),
    "min_dim_keepdim": (lambda x: x.min(dim=0, keepdim=True).values, lambda t: t.min(dim=0, keepdim=True).values),
    "softmax": (lambda x: F.softmax(x, dim=0), lambda t: torch.softmax(t, dim=0)),
    "logsumexp": (lambda x: x.logsumexp(dim=1), lambda t: t.logsumexp(dim=1)),
    "masked_fill": (lambda x: x.masked_fill(x > 1.0, -3.0), lambda t: t.masked_fill(t > 1.0, -3.0)),
    "tril": (lambda x: mta.tril(x, 1), lambda t: torch.tril(t, 1)),
    "triu": (lambda x: x.triu(-1), lambda t: t.triu(-1)),
    "split": (lambda x: x.split(2, dim=1)[2] * 2.0 + x.split([1, 4], dim=1)[0],
              lambda t: t.split(2, dim=1)[2] * 2.0 + t.split([1, 4], dim=1)[0]),
    "chunk": (lambda x: mta.cat(x.chunk(2, dim=1)[::-1], dim=1), lambda t: torch.cat(t.chunk(2, dim=1)[::-1], dim=1)),
    "flatten_unsqueeze": (lambda x: x.unsqueeze(0).flatten(0, 1).mT, lambda t: t.unsqueeze(0).flatten(0, 1).mT),
    "expand": (lambda x: x[:, :1].expand(3, -1, 4), lambda t: t[:, :1].expand(3, -1, 4)),
}


@pytest.mark.parametrize("name", sorted(UNARY_OPS))
def test_op_matches_pytorch_at_edge_points(name: str) -> None:
    ours_fn, theirs_fn = UNARY_OPS[name]
    x, t = both(EDGES)
    compare(ours_fn(x), theirs_fn(t), [(x, t)])


def test_max_and_argmax_indices_match_pytorch() -> None:
    x, t = both(EDGES)
    ours, theirs = x.max(dim=1), t.max(dim=1)
    assert ours.indices.tolist() == theirs.indices.tolist()
    assert x.argmax().item() == int(t.argmax()) and x.argmin(dim=0).tolist() == t.argmin(dim=0).tolist()


@pytest.mark.parametrize("name", ["maximum", "minimum", "pow"])
def test_binary_op_matches_pytorch_at_ties_and_zeros(name: str) -> None:
    a_values = np.array([0.0, 0.0, 0.0, 2.0, 1.5, 0.0])
    b_values = np.array([0.0, 1.0, 2.5, 0.0, 1.5, -1.0])
    (a, ta), (b, tb) = both(a_values), both(b_values)
    ours = {"maximum": mta.maximum, "minimum": mta.minimum, "pow": lambda p, q: p**q}[name](a, b)
    theirs = {"maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow}[name](ta, tb)
    if name == "pow":  # 0 ** -1 is inf, and its gradient is not a number either side means the same
        keep = b_values >= 0
        ours, theirs = ours[np.flatnonzero(keep)], theirs[torch.from_numpy(np.flatnonzero(keep))]
    compare(ours, theirs, [(a, ta), (b, tb)])


@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
def test_scaled_dot_product_attention_matches_pytorch(mask: str) -> None:
    rng = np.random.default_rng(3)
    (q, tq), (k, tk), (v, tv) = (both(rng.normal(size=(2, 3, n, e))) for n, e in ((4, 8), (4, 8), (4, 5)))
    attn_mask = {"none": None, "causal": None, "bool": rng.random((4, 4)) > 0.4,
                 "float": rng.normal(size=(3, 4, 4))}[mask]
    if mask == "bool":
        attn_mask[:, 0] = True
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=mask == "causal", scale=0.3)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if attn_mask is None else torch.from_numpy(attn_mask),
        is_causal=mask == "causal", scale=0.3)
    compare(ours, theirs, [(q, tq), (k, tk), (v, tv)])

"""The equivalence properties checked against PyTorch's own accumulation (``.grad`` summed
over micro-batch ``backward()`` calls) for the same weights and data. Runs when the
``oracle`` extra is installed; skipped otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minitorch_accum import nn, optim
from minitorch_accum.testing import Case, run_window
from minitorch_accum.testing.accumulation_strategies import cases, model_specs

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle


def to_torch(model: nn.Sequential) -> torch.nn.Sequential:
    layers = []
    for layer in model:
        if isinstance(layer, nn.Linear):
            t = torch.nn.Linear(layer.in_features, layer.out_features, dtype=torch.float64)
            with torch.no_grad():
                t.weight.copy_(torch.from_numpy(layer.weight.numpy().T.copy()))
                t.bias.copy_(torch.from_numpy(layer.bias.numpy()))
        elif isinstance(layer, nn.Embedding):
            t = torch.nn.Embedding(layer.num_embeddings, layer.embedding_dim, dtype=torch.float64)
            with torch.no_grad():
                t.weight.copy_(torch.from_numpy(layer.weight.numpy()))
        elif isinstance(layer, nn.LayerNorm):
            t = torch.nn.LayerNorm(layer.d, eps=layer.eps, dtype=torch.float64)
        else:
            t = {nn.ReLU: torch.nn.ReLU(), nn.Tanh: torch.nn.Tanh(),
                 nn.GELU: torch.nn.GELU(approximate=getattr(layer, "approximate", "none"))}[type(layer)]
        layers.append(t)
    return torch.nn.Sequential(*layers)


def torch_grads(reference: torch.nn.Sequential) -> list[np.ndarray]:
    out = []
    for module in reference:
        if isinstance(module, torch.nn.Linear):
            out += [module.weight.grad.numpy().T, module.bias.grad.numpy()]
        elif isinstance(module, torch.nn.Embedding | torch.nn.LayerNorm):
            out += [p.grad.numpy() for p in module.parameters()]
    return out


def torch_loss(reference, case: Case, x: np.ndarray, y: np.ndarray, reduction: str):
    inputs = torch.from_numpy(x)
    logits = reference(inputs)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1),
                                             ignore_index=-100, reduction=reduction)


def torch_window(case: Case, reference) -> list[np.ndarray]:
    """PyTorch's accumulation: backward per micro-batch into .grad, exact or mean-of-means."""
    x, y = case.batch()
    total = int((y != -100).sum())
    reference.zero_grad()
    for part in case.slices():
        if case.reduction == "items":
            (torch_loss(reference, case, x[part], y[part], "sum") / total).backward()
        else:  # the per-micro-batch mean, divided by k: what most accumulation loops do
            (torch_loss(reference, case, x[part], y[part], "mean") / len(case.sizes)).backward()
    return torch_grads(reference)


def _assert_window_matches_torch(case: Case) -> None:
    model, acc = run_window(case)
    ours = [np.asarray(acc.grads()[p]) for p in model.parameters()]
    theirs = torch_window(case, to_torch(case.model.build("float64")))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)


@given(cases(dtypes=("float64",), reductions=("items",)))
def test_window_grad_matches_pytorch_accumulation(case: Case) -> None:
    _assert_window_matches_torch(case)


@given(cases(dtypes=("float64",), reductions=("mean",), kinds=("mlp",)))
def test_mean_of_means_matches_pytorch_mean_of_means(case: Case) -> None:
    """Both libraries compute the same (biased, for uneven sizes) mean of micro-batch means."""
    _assert_window_matches_torch(case)


@given(spec=model_specs(kinds=("mlp",)), k=st.integers(1, 4), b=st.integers(1, 5), steps=st.integers(1, 3))
def test_adamw_parameters_after_steps_match_pytorch(spec, k: int, b: int, steps: int) -> None:
    model = spec.build("float64")
    reference = to_torch(model)
    opt = optim.AdamW(lr=0.01, weight_decay=0.1)
    torch_opt = torch.optim.AdamW(reference.parameters(), lr=0.01, weight_decay=0.1)
    from minitorch_accum.accum import Accumulator

    acc = Accumulator(model, steps=k, accum_dtype="float64")
    for step in range(steps):
        case = Case(model=spec, sizes=(b,) * k, data_seed=step)
        run_window(case, model, accumulator=acc)
        opt.step(model, acc)
        acc.zero()
        torch_window(case, reference)
        torch_opt.step()
    theirs = [p.detach().numpy().T if p.ndim == 2 else p.detach().numpy() for p in reference.parameters()]
    for a, c in zip([p.numpy() for p in model.parameters()], theirs, strict=True):
        np.testing.assert_allclose(a, c, rtol=0, atol=1e-10)

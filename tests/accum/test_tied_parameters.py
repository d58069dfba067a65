"""A parameter used twice in one forward pass (tied weights) gets the sum of both uses'
gradients in every fusion mode: within a micro-batch the second contribution must add to
the first (add_scale, or a GEMM with beta = 1), never copy over it.

Three models: one square Linear applied twice, ``y = L(tanh(L(x)))``; two Linear layers
holding one weight Param; an embedding table tied to the output head (``logits =
tanh(E[ids]) @ E^T + b``, GPT style), whose two contributions come from different ops.
Each window is checked in float64 against an untied twin (the same values in separate
Params), whose full-batch gradients summed over the uses are what the tied gradient must
be, and against a plain ``loss.backward()`` of the tied model on the full batch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.accum import Accumulator
from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn import functional as F
from tests.accum.helpers import split

DIM = 4
VOCAB = 6
SEQ = 3
# two windows of k = 4: the first full and uneven (27 items), the second partial (2 of 4
# micro-batches, 7 items), so the second window's first write must copy over the first's
WINDOWS = ((7, 1, 16, 3), (5, 2))
CONFIGS = [("leaf", False), ("leaf", True), ("gemm", False), ("gemm", True), ("none", False)]


def _copy(layer: nn.Linear) -> nn.Linear:
    twin = nn.Linear(layer.in_features, layer.out_features, dtype="float64")
    twin.weight.value = layer.weight.numpy().copy()
    twin.bias.value = layer.bias.numpy().copy()
    return twin


def linear_applied_twice(tied: bool = True) -> nn.Module:
    """y = L(tanh(L(x))), L square; untied: the second L is a copy."""
    inner = nn.Linear(DIM, DIM, dtype="float64", rng=np.random.default_rng(0))
    return nn.Sequential(inner, nn.Tanh(), inner if tied else _copy(inner))


def weight_shared_by_two_layers(tied: bool = True) -> nn.Module:
    """Two square layers with one weight Param (own biases), then a head."""
    rng = np.random.default_rng(1)
    first = nn.Linear(DIM, DIM, dtype="float64", rng=rng)
    second = nn.Linear(DIM, DIM, dtype="float64", rng=rng)
    second.weight = first.weight if tied else _param(first.weight)
    return nn.Sequential(first, nn.Tanh(), second, nn.Tanh(), nn.Linear(DIM, 3, dtype="float64", rng=rng))


def _param(param: nn.Param) -> nn.Param:
    return nn.Param(param.numpy().copy())


class TiedHead(nn.Module):
    """logits = tanh(E[ids]) @ head + bias, head = E^T (tied) or a copy of E^T (untied)."""

    def __init__(self, tied: bool = True) -> None:
        rng = np.random.default_rng(2)
        self.embedding = nn.Embedding(VOCAB, DIM, dtype="float64", rng=rng)
        self.bias = nn.Param(rng.normal(size=VOCAB))
        self.head = None if tied else nn.Param(self.embedding.weight.numpy().T.copy())

    def forward(self, ids: np.ndarray) -> Tensor:
        head = self.embedding.weight.T if self.head is None else self.head
        return self.embedding(ids).tanh() @ head + self.bias


# model builder, data, and how the untied twin's gradients fold into the tied parameters
# (tied name -> [(untied name, transposed)])
MODELS: dict[str, tuple[Callable[[bool], nn.Module], str, dict[str, list[tuple[str, bool]]]]] = {
    "linear_applied_twice": (linear_applied_twice, "features", {
        "0.weight": [("0.weight", False), ("2.weight", False)], "0.bias": [("0.bias", False), ("2.bias", False)]}),
    "weight_shared_by_two_layers": (weight_shared_by_two_layers, "features", {
        "0.weight": [("0.weight", False), ("2.weight", False)], "0.bias": [("0.bias", False)],
        "2.bias": [("2.bias", False)], "4.weight": [("4.weight", False)], "4.bias": [("4.bias", False)]}),
    "embedding_tied_to_output_head": (TiedHead, "tokens", {
        "embedding.weight": [("embedding.weight", False), ("head", True)], "bias": [("bias", False)]}),
}


def batch(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "tokens":
        return rng.integers(0, VOCAB, size=(n, SEQ)), rng.integers(0, VOCAB, size=(n, SEQ))
    return rng.normal(size=(n, DIM)), rng.integers(0, 3, size=n)


def inputs(x: np.ndarray) -> object:
    return x if x.dtype.kind == "i" else mta.tensor(x, dtype="float64")


def full_batch_gradient(model: nn.Module, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """A plain backward() of the mean loss over the whole batch, by parameter name."""
    grads = F.cross_entropy(model(inputs(x)), y).backward()
    return {name: np.asarray(grads[p]) for name, p in model.named_parameters()}


def max_gap(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    assert set(a) == set(b)
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


@pytest.mark.parametrize("name", list(MODELS))
def test_each_model_really_uses_one_parameter_twice(name: str) -> None:
    build, _, fold = MODELS[name]
    tied, untied = build(True), build(False)
    assert [n for n, _ in tied.named_parameters()] == list(fold)
    assert sum(len(uses) for uses in fold.values()) == len(list(untied.named_parameters()))
    assert max(len(uses) for uses in fold.values()) == 2


def sum_over_uses(name: str, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """The independent reference: the untied twin's full-batch gradient of each use, summed
    into the tied parameter's (no gradient of the twin meets another inside backward)."""
    build, _, fold = MODELS[name]
    untied = full_batch_gradient(build(False), x, y)
    return {tied: sum(untied[u].T if transposed else untied[u] for u, transposed in uses)
            for tied, uses in fold.items()}


@pytest.mark.parametrize("name", list(MODELS))
def test_full_batch_gradient_of_a_tied_weight_is_the_sum_over_its_uses(name: str) -> None:
    build, kind, _ = MODELS[name]
    x, y = batch(kind, sum(WINDOWS[0]), seed=0)
    assert max_gap(full_batch_gradient(build(True), x, y), sum_over_uses(name, x, y)) <= 1e-12


@pytest.mark.parametrize("fusion, compensated", CONFIGS, ids=[f"{f}{'-compensated' if c else ''}" for f, c in CONFIGS])
@pytest.mark.parametrize("name", list(MODELS))
def test_tied_weights_window_equals_full_batch(name: str, fusion: str, compensated: bool) -> None:
    """float64, uneven micro-batches, two windows (the second partial): each window's gradient
    equals the full-batch gradient summed over the uses, and a plain backward() of the tied
    model on the full batch, to 1e-12 (only the summation order differs)."""
    build, kind, _ = MODELS[name]
    model = build(True)
    acc = Accumulator(model, steps=len(WINDOWS[0]), reduction="items", fusion=fusion, accum_dtype="float64",
                      compensated=compensated)
    for window, sizes in enumerate(WINDOWS):
        x, y = batch(kind, sum(sizes), seed=10 + window)
        for part in split(len(y), sizes):
            loss = F.cross_entropy(model(inputs(x[part])), y[part], reduction="sum")
            acc.backward(loss, num_items=F.count_items(y[part]))
        assert acc.micro_step == len(sizes) and acc.items_seen == F.count_items(y)
        grads = acc.grads()
        got = {n: np.asarray(grads[p]) for n, p in model.named_parameters()}
        assert max_gap(got, sum_over_uses(name, x, y)) <= 1e-12, f"window {window}"
        assert max_gap(got, full_batch_gradient(model, x, y)) <= 1e-12, f"window {window}"
        acc.zero()

"""Small models and data shared by the accumulation tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

import minitorch_accum as mta
from minitorch_accum import nn
from minitorch_accum.nn import functional as F

SIZES = (7, 1, 16, 3)  # uneven on purpose: 27 items in 4 micro-batches


def mlp(dtype: str = "float64", seed: int = 0, hidden: int = 8) -> nn.Module:
    rng = np.random.default_rng(seed)
    return nn.Sequential(nn.Linear(5, hidden, dtype=dtype, rng=rng), nn.Tanh(),
                         nn.Linear(hidden, 3, dtype=dtype, rng=rng))


def data(n: int = sum(SIZES), seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)), rng.integers(0, 3, size=n)


def split(n_items: int, sizes: tuple[int, ...]) -> list[slice]:
    bounds = np.cumsum((0, *sizes))
    assert bounds[-1] == n_items
    return [slice(int(a), int(b)) for a, b in pairwise(bounds)]


def summed_loss(model: nn.Module, x: np.ndarray, y: np.ndarray, dtype: str) -> mta.Tensor:
    return F.cross_entropy(model(mta.tensor(x, dtype=dtype)), y, reduction="sum")


def full_batch_grads(model: nn.Module, x: np.ndarray, y: np.ndarray, dtype: str) -> dict[str, np.ndarray]:
    """The gradient of the mean loss over all items, by parameter name."""
    grads = F.cross_entropy(model(mta.tensor(x, dtype=dtype)), y).backward()
    return {name: np.asarray(grads[p], dtype=np.float64) for name, p in model.named_parameters()}


def window_grads(acc: Any, model: nn.Module) -> dict[str, np.ndarray]:
    grads = acc.grads()
    return {name: np.asarray(grads[p], dtype=np.float64) for name, p in model.named_parameters()}


def max_difference(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a)


class TwoHeads(nn.Module):
    """Either head answers, so a micro-batch (or a whole rank's window) may leave one head unwritten."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.a = nn.Linear(5, 3, dtype="float64", rng=rng)
        self.b = nn.Linear(5, 3, dtype="float64", rng=rng)
        self.use_b = True

    def forward(self, t):
        return self.b(t) if self.use_b else self.a(t)


class PassRecorder:
    """A store's recorder that keeps each pass it is told of: ([(parameter, kernel)...], window_pass)."""

    def __init__(self) -> None:
        self.passes: list[tuple[list[tuple[str, str]], bool]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"a store reports its own passes with timed(), not a call: {args}")

    @contextlib.contextmanager
    def timed(self, work: Sequence[tuple[str, str, Any]], *, window_pass: bool) -> Iterator[None]:
        yield
        self.passes.append(([(param, kernel) for param, kernel, _ in work], window_pass))

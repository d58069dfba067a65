"""The models the end-to-end benchmark trains: what is built, on which data, with which loss,
and the same model in PyTorch. The measurement only calls the ``ModelCase`` methods, so a
new model (a char-level transformer, say) is one more class here and one more settings entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from minitorch_accum import Tensor, nn
from minitorch_accum.nn import functional as F

__all__ = ["DIGITS", "WIDE", "ModelCase", "ModelSpec"]


class ModelCase(Protocol):
    """What the measurement needs of a model: its name and rounds, how to build it and its data,
    the loss of one micro-batch (summed over its items), and its PyTorch twin."""

    name: str
    repeats: int
    warmup: int

    def describe(self) -> dict[str, Any]:
        """The model's own entries of its result section (before parameters and timings)."""
        ...

    def model(self, device: str, rng: np.random.Generator) -> nn.Module: ...

    def data(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` items: micro-batch i of a window is rows [i*b, (i+1)*b)."""
        ...

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor: ...

    def torch_model(self, torch: Any, model: nn.Module) -> Any:
        """The same model in PyTorch, with the same initial values, on the CPU."""
        ...

    def torch_loss(self, torch: Any, model: Any, x: Any, y: Any) -> Any: ...


@dataclass(frozen=True)
class ModelSpec:
    """An MLP (Linear-ReLU-...-Linear) of layer widths ``dims`` and the data it reads."""

    name: str
    dims: tuple[int, ...]
    dataset: str  # "digits" (scikit-learn's, 64 features, 10 classes) or "synthetic" (Gaussian inputs)
    repeats: int
    warmup: int

    def __post_init__(self) -> None:
        if len(self.dims) < 2:
            raise ValueError(f"ModelSpec {self.name}: dims needs at least (in, out), got {self.dims}")
        if self.dataset not in ("digits", "synthetic"):
            raise ValueError(f"ModelSpec {self.name}: dataset must be 'digits' or 'synthetic', got {self.dataset!r}")
        if self.dataset == "digits" and (self.dims[0] != 64 or self.dims[-1] != 10):
            raise ValueError(f"ModelSpec {self.name}: digits needs dims (64, ..., 10), got {self.dims}")

    def describe(self) -> dict[str, Any]:
        return {"dims": list(self.dims), "dataset": self.dataset}

    def model(self, device: str, rng: np.random.Generator) -> nn.Sequential:
        layers: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(pairwise(self.dims)):
            layers.append(nn.Linear(fan_in, fan_out, device=device, rng=rng))
            if i < len(self.dims) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    def data(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` items: micro-batch i of a window is rows [i*b, (i+1)*b), so k micro-batches
        cover exactly the rows of the big batch of k*b they are compared with."""
        if self.dataset == "digits":
            from minitorch_accum.data import load_digits

            features, labels = load_digits().arrays
            if count > len(features):
                raise ValueError(f"{self.name}: k*b = {count} is more than the {len(features)} digits")
            order = rng.permutation(len(features))[:count]
            return np.ascontiguousarray(features[order]), labels[order]
        features = rng.standard_normal((count, self.dims[0]), dtype=np.float32)
        return features, rng.integers(0, self.dims[-1], size=count)

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(model(x), y, reduction="sum")

    def torch_model(self, torch: Any, model: nn.Module) -> Any:
        modules = []
        for layer in model:  # type: ignore[attr-defined]  (a Sequential, built by model())
            if isinstance(layer, nn.Linear):
                twin = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
                with torch.no_grad():
                    # ours stores the weight (in, out), torch (out, in)
                    twin.weight.copy_(torch.from_numpy(np.ascontiguousarray(layer.weight.numpy().T)))
                    if layer.bias is not None:
                        twin.bias.copy_(torch.from_numpy(layer.bias.numpy()))
                modules.append(twin)
            else:
                modules.append(torch.nn.ReLU())
        return torch.nn.Sequential(*modules)

    def torch_loss(self, torch: Any, model: Any, x: Any, y: Any) -> Any:
        return torch.nn.functional.cross_entropy(model(x), y, reduction="sum")


# the digits MLP's windows take milliseconds: many rounds are cheap and steady its medians
DIGITS = ModelSpec("digits_mlp", (64, 128, 10), "digits", repeats=61, warmup=5)
# a round of the wide MLP is 31 micro-batches per variant for k in {1, 2, 4, 8, 16}: about
# 10 s on two idle cores, several times that when another process holds a core
WIDE = ModelSpec("wide_mlp", (1024, 4096, 4096, 10), "synthetic", repeats=7, warmup=1)

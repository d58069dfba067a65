"""Activation layers (stateless modules around the functional forms)."""

from __future__ import annotations

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn.module import Module

__all__ = ["GELU", "ReLU", "Sigmoid", "Tanh"]


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class GELU(Module):
    """GELU in its tanh form."""

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu()


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()

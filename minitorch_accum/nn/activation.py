"""Activation layers (stateless modules around the functional forms)."""

from __future__ import annotations

from minitorch_accum.autodiff import Tensor
from minitorch_accum.nn.module import Module
from minitorch_accum.ops.elementwise import GELU_APPROXIMATIONS

__all__ = ["GELU", "ReLU", "Sigmoid", "Tanh"]


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class GELU(Module):
    """GELU: the exact erf form by default, ``approximate="tanh"`` for GPT-2's (PyTorch's choices)."""

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in GELU_APPROXIMATIONS:
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu(self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()

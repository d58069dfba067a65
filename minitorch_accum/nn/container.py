"""Sequential: modules applied one after another, named "0", "1", ... as in PyTorch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from minitorch_accum.nn.module import Module

__all__ = ["Sequential"]


class Sequential(Module):
    def __init__(self, *layers: Module) -> None:
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, not a Module")
        self.layers = list(layers)

    def _members(self) -> Iterator[tuple[str, Any]]:
        yield from ((str(i), layer) for i, layer in enumerate(self.layers))

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index: int) -> Module:
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.layers)

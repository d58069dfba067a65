"""The MLP of the digits task: 8x8 images (64 inputs), one hidden layer of 128, 10 classes."""

from __future__ import annotations

from typing import Any

from minitorch_accum.nn import Linear, ReLU, Sequential

__all__ = ["digits_mlp"]


def digits_mlp(dtype: Any = "float32") -> Sequential:
    """64-128-10 with a ReLU; a Sequential, so its parameters are ``0.weight`` ... ``2.bias``
    (the names its checkpoints record)."""
    return Sequential(Linear(64, 128, dtype=dtype), ReLU(), Linear(128, 10, dtype=dtype))

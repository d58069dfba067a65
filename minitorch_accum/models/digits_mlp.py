"""The MLP of the digits task: 8x8 images (64 inputs), one hidden layer of 128, 10 classes;
and two variants whose window gradient is *not* the big batch's, for ``maccum explain``: a
BatchNorm1d after the hidden layer (it couples a batch's items) or dropout (masks are drawn
anew for every batch)."""

from __future__ import annotations

from typing import Any

from minitorch_accum.nn import BatchNorm1d, Dropout, Linear, Module, ReLU, Sequential

__all__ = ["DIGITS_MLP_VARIANTS", "digits_mlp"]

#: the variants by name (``maccum explain --model``): digits_mlp's keyword arguments for each
DIGITS_MLP_VARIANTS: dict[str, dict[str, Any]] = {"batchnorm": {"batch_norm": True}, "dropout": {"dropout": 0.2}}


def digits_mlp(dtype: Any = "float32", *, batch_norm: bool = False, dropout: float = 0.0) -> Sequential:
    """64-128-10 with a ReLU; a Sequential, so its parameters are ``0.weight`` ... ``2.bias``
    (the names its checkpoints record). ``batch_norm=True`` puts a BatchNorm1d(128) before the
    ReLU, ``dropout=p`` a Dropout(p) after it (the layers after them are numbered on)."""
    layers: list[Module] = [Linear(64, 128, dtype=dtype)]
    if batch_norm:
        layers.append(BatchNorm1d(128, dtype=dtype))
    layers.append(ReLU())
    if dropout:
        layers.append(Dropout(dropout))
    layers.append(Linear(128, 10, dtype=dtype))
    return Sequential(*layers)

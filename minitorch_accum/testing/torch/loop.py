"""``check_training_loop`` for PyTorch: how the check reads a torch Module (its parameters, its
dtype, the layers that make a window differ from the big batch) and seeds torch's generator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from minitorch_accum.testing.equivalence import AccumulationReport
from minitorch_accum.testing.training_loop import Loop, LoopFramework
from minitorch_accum.testing.training_loop import check_training_loop as _check_training_loop

__all__ = ["TORCH", "Loop", "check_training_loop", "require_torch", "torch_inexact_layers"]


def require_torch() -> Any:
    """The torch module, or an ImportError that says how to install it."""
    try:
        import torch
    except ImportError as error:
        raise ImportError("minitorch_accum.testing.torch checks PyTorch loops and models and needs PyTorch: "
                          "pip install \"minitorch_accum[oracle]\" (or any torch)") from error
    return torch


def _parameters(model: Any) -> dict[str, np.ndarray]:
    torch = require_torch()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"the loop's model must be a torch.nn.Module, got {type(model).__name__}")
    return {name: p.detach().to("cpu", torch.float64).numpy().copy() for name, p in model.named_parameters()}


def _dtype(model: Any) -> str:
    first = next(iter(model.parameters()), None)
    return "float64" if first is None else str(first.dtype).removeprefix("torch.")


def torch_inexact_layers(model: Any) -> list[str]:
    """Why ``model`` in its current mode cannot give the big batch's gradient: training-mode
    BatchNorm (statistics per micro-batch) and active dropout (masks per micro-batch)."""
    torch = require_torch()
    # BatchNorm1d/2d/3d, SyncBatchNorm and the lazy ones share _BatchNorm; every dropout shares _DropoutNd
    batch_norm, dropout = torch.nn.modules.batchnorm._BatchNorm, torch.nn.modules.dropout._DropoutNd
    reasons = []
    for name, module in model.named_modules():
        where = f"layer {name} ({type(module).__name__})" if name else type(module).__name__
        if isinstance(module, batch_norm) and module.training:
            reasons.append(f"{where}: BatchNorm in training mode normalizes each micro-batch by its own statistics")
        elif isinstance(module, dropout) and module.training and module.p > 0:
            reasons.append(f"{where}: dropout (p={module.p}) draws its masks per micro-batch")
    return reasons


def _seed(seed: int) -> None:
    require_torch().manual_seed(seed)


TORCH = LoopFramework("torch", _parameters, torch_inexact_layers, _dtype, _seed)


def check_training_loop(make_loop: Callable[[int], Any], batch: Any, *,
                        splits: Sequence[int] | Sequence[Sequence[int]] | None = None, windows: int = 3,
                        partial: bool = True, raise_on_failure: bool = True) -> AccumulationReport:
    """``minitorch_accum.testing.check_training_loop`` for a loop that trains a torch Module: ``make_loop(k)``
    returns ``Loop(model, window)`` (or ``(model, window)``), ``batch`` holds tensors (a tuple, a dict or
    one), rows along axis 0; torch's generator is seeded with 0 before each loop is built."""
    require_torch()
    return _check_training_loop(make_loop, batch, splits=splits, windows=windows, partial=partial, framework=TORCH,
                                raise_on_failure=raise_on_failure)

"""The optimizer protocol, after Burn: ``model = opt.step(model, grads)``.

Parameters are updated in place (the same Param objects, so anything holding them
stays valid) and the model is returned for Burn's reading order. State is kept per
parameter *name*, so a checkpoint can be restored into a freshly built model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from minitorch_accum.backend import backend_of_array
from minitorch_accum.nn import Module, Param
from minitorch_accum.optim.grad_source import GradientWindow, gradient_window

__all__ = ["Optimizer", "UpdateEntry"]

# (name, param, gradient array)
UpdateEntry = tuple[str, Param, Any]


class Optimizer(ABC):
    """Base class: collects (name, param, grad) for a step and hands them to ``_update``."""

    def __init__(self, lr: float) -> None:
        self.lr = _check_positive("lr", lr)
        self.state: dict[str, dict[str, Any]] = {}
        self.step_count = 0
        self.skipped_steps = 0

    def step(self, model: Module, grads: Any, lr: float | None = None) -> Module:
        """One update of every parameter of ``model`` that has a gradient in ``grads``.

        ``grads`` is a Gradients container or an Accumulator. A window marked
        non-finite is skipped: no parameter or state changes, ``skipped_steps`` grows.
        """
        window = gradient_window(grads)
        if window.skip:
            self.skipped_steps += 1
            return model
        entries = self._entries(model, window)
        self.step_count += 1
        self._update(entries, self.lr if lr is None else _check_positive("lr", lr), window.grad_scale)
        return model

    @staticmethod
    def _entries(model: Module, window: GradientWindow) -> list[UpdateEntry]:
        entries = []
        for name, param in model.named_parameters():
            grad = window.get(param)
            if grad is None:
                continue
            if tuple(grad.shape) != param.shape:
                raise ValueError(
                    f"optimizer: gradient for {name} has shape {tuple(grad.shape)}, parameter has {param.shape}"
                )
            if backend_of_array(grad).device != param.device:
                raise ValueError(f"optimizer: gradient for {name} is on another device than the parameter")
            entries.append((name, param, grad))
        return entries

    @abstractmethod
    def _update(self, entries: list[UpdateEntry], lr: float, grad_scale: float) -> None:
        """Apply the update rule to every entry, the gradient taken times ``grad_scale``."""

    # ------------------------------------------------------------- state
    def hyperparameters(self) -> dict[str, Any]:
        return {"lr": self.lr}

    def state_dict(self) -> dict[str, Any]:
        """Counters, hyperparameters, and per-parameter state arrays as host NumPy copies."""
        return {
            "step_count": self.step_count,
            "skipped_steps": self.skipped_steps,
            "hyperparameters": self.hyperparameters(),
            "state": {
                name: {key: (np.array(backend_of_array(v).to_host(v), copy=True) if hasattr(v, "shape") else v)
                       for key, v in slots.items()}
                for name, slots in self.state.items()
            },
        }

    def load_state_dict(self, state: dict[str, Any], model: Module | None = None) -> None:
        """Restore ``state_dict()`` output; with ``model``, arrays move to its parameters' devices
        and every name must belong to one of its parameters."""
        params = dict(model.named_parameters()) if model is not None else {}
        restored: dict[str, dict[str, Any]] = {}
        for name, slots in state["state"].items():
            if model is not None and name not in params:
                raise ValueError(f"optimizer state names parameter {name!r}, which the model does not have")
            backend = params[name]._backend if name in params else None
            restored[name] = {
                key: (backend.asarray(v) if backend is not None and isinstance(v, np.ndarray) else v)
                for key, v in slots.items()
            }
        self.state = restored
        self.step_count = int(state["step_count"])
        self.skipped_steps = int(state.get("skipped_steps", 0))
        for key, value in state.get("hyperparameters", {}).items():
            setattr(self, key, value)


def _check_positive(name: str, value: float) -> float:
    if not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def _check_range(name: str, value: float, low: float, high: float) -> float:
    if not low <= value < high:
        raise ValueError(f"{name} must be in [{low}, {high}), got {value!r}")
    return float(value)

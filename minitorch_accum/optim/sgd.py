"""SGD with momentum, dampening, Nesterov and L2 weight decay (PyTorch's rule), fused."""

from __future__ import annotations

from typing import Any

from minitorch_accum import kernels
from minitorch_accum.optim.fused_groups import group_for_fused_step
from minitorch_accum.optim.hyperparameter_checks import check_flag, check_range, check_rate, params_or_lr
from minitorch_accum.optim.optimizer import Optimizer, Params, UpdateEntry

__all__ = ["SGD"]


class SGD(Optimizer):
    """p -= lr * d, where d = g + wd*p, buf = momentum*buf + (1-dampening)*d, and
    d = buf (or d + momentum*buf with Nesterov). g is the gradient times the window's
    scale, folded into the same kernel.

    ``SGD(0.1, momentum=0.9)`` updates every parameter of the model given to ``step``;
    ``SGD(model.parameters(), lr=0.1)`` or ``SGD([{"params": ..., "lr": ...}, ...], lr=0.1)``
    only those, PyTorch style (see ``Optimizer``).
    """

    hyperparameter_names = ("lr", "momentum", "weight_decay", "nesterov", "dampening")

    def __init__(self, params: Params | float | None = None, lr: float | None = None, *, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, dampening: float = 0.0) -> None:
        chosen, rate = params_or_lr("SGD", params, lr)
        if rate is None:
            raise TypeError("SGD: lr is required, e.g. SGD(0.1) or SGD(model.parameters(), lr=0.1)")
        super().__init__(chosen, {"lr": rate, "momentum": momentum, "weight_decay": weight_decay,
                                  "nesterov": nesterov, "dampening": dampening})

    def _validated(self, hyperparameters: dict[str, Any]) -> dict[str, Any]:
        h = hyperparameters
        checked = {
            "lr": check_rate("lr", h["lr"]),
            "momentum": check_range("momentum", h["momentum"], 0.0, 1.0),
            "weight_decay": check_range("weight_decay", h["weight_decay"], 0.0, float("inf")),
            "nesterov": check_flag("nesterov", h["nesterov"]),
            "dampening": check_range("dampening", h["dampening"], 0.0, 1.0 + 1e-12),
        }
        if checked["nesterov"] and (checked["momentum"] == 0.0 or checked["dampening"] != 0.0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        return checked

    def state_slots(self) -> int:
        """One momentum buffer per parameter when any group uses momentum, none otherwise."""
        return int(any(group["momentum"] != 0.0 for group in self.param_groups))

    def state_array_slots(self, settings: dict[str, Any]) -> tuple[str, ...]:
        return ("momentum_buffer",) if settings["momentum"] != 0.0 else ()

    def _update(self, entries: list[UpdateEntry], settings: dict[str, Any], grad_scale: float) -> None:
        uses_momentum = settings["momentum"] != 0.0

        def first(name: str, _: object) -> bool:
            return uses_momentum and "momentum_buffer" not in self.state.get(name, {})

        for group in group_for_fused_step(entries, first, self.state):
            first_step = first(group.names[0], None)
            bufs = None
            if uses_momentum:
                for name, data in zip(group.names, group.params, strict=True):
                    self.state[name].setdefault("momentum_buffer", group.xp.zeros(data.shape, dtype=data.dtype))
                bufs = [self.state[name]["momentum_buffer"] for name in group.names]
            with self._launch("multi_sgd_momentum_step", group, grad_scale):
                kernels.multi_sgd_momentum_step(
                    group.params, group.grads, bufs, lr=settings["lr"], momentum=settings["momentum"],
                    dampening=settings["dampening"], weight_decay=settings["weight_decay"],
                    nesterov=settings["nesterov"], grad_scale=grad_scale, first_step=first_step,
                )
            group.write_back()

"""SGD with momentum, dampening, Nesterov and L2 weight decay (PyTorch's rule), fused."""

from __future__ import annotations

from minitorch_accum import kernels
from minitorch_accum.optim.fused_groups import group_for_fused_step
from minitorch_accum.optim.optimizer import Optimizer, UpdateEntry, _check_range

__all__ = ["SGD"]


class SGD(Optimizer):
    """p -= lr * d, where d = g + wd*p, buf = momentum*buf + (1-dampening)*d, and
    d = buf (or d + momentum*buf with Nesterov). g is the gradient times the window's
    scale, folded into the same kernel."""

    def __init__(self, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 dampening: float = 0.0) -> None:
        super().__init__(lr)
        self.momentum = _check_range("momentum", momentum, 0.0, 1.0)
        self.weight_decay = _check_range("weight_decay", weight_decay, 0.0, float("inf"))
        self.dampening = _check_range("dampening", dampening, 0.0, 1.0 + 1e-12)
        if nesterov and (momentum == 0.0 or dampening != 0.0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        self.nesterov = nesterov

    def hyperparameters(self) -> dict:
        return {"lr": self.lr, "momentum": self.momentum, "weight_decay": self.weight_decay,
                "nesterov": self.nesterov, "dampening": self.dampening}

    def _update(self, entries: list[UpdateEntry], lr: float, grad_scale: float) -> None:
        uses_momentum = self.momentum != 0.0
        def first(name: str, _: object) -> bool:
            return uses_momentum and "momentum_buffer" not in self.state.get(name, {})

        for group in group_for_fused_step(entries, first, self.state):
            first_step = first(group.names[0], None)
            bufs = None
            if uses_momentum:
                for name, data in zip(group.names, group.params, strict=True):
                    self.state[name].setdefault("momentum_buffer", group.xp.zeros(data.shape, dtype=data.dtype))
                bufs = [self.state[name]["momentum_buffer"] for name in group.names]
            kernels.multi_sgd_momentum_step(
                group.params, group.grads, bufs, lr=lr, momentum=self.momentum, dampening=self.dampening,
                weight_decay=self.weight_decay, nesterov=self.nesterov, grad_scale=grad_scale,
                first_step=first_step,
            )
            group.write_back()

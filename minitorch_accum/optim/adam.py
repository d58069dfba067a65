"""Adam (L2 weight decay) and AdamW (decoupled weight decay), fused, PyTorch's rule."""

from __future__ import annotations

from typing import Any

from minitorch_accum import kernels
from minitorch_accum.optim.fused_groups import group_for_fused_step
from minitorch_accum.optim.optimizer import Optimizer, UpdateEntry, _check_positive, _check_range

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr m_hat / (sqrt(v_hat) + eps).

    Weight decay is added to the gradient (L2); AdamW decouples it instead.
    """

    decoupled = False

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        super().__init__(lr)
        b1, b2 = betas
        self.betas = (_check_range("beta1", b1, 0.0, 1.0), _check_range("beta2", b2, 0.0, 1.0))
        self.eps = _check_positive("eps", eps)
        self.weight_decay = _check_range("weight_decay", weight_decay, 0.0, float("inf"))

    def hyperparameters(self) -> dict[str, Any]:
        return {"lr": self.lr, "betas": list(self.betas), "eps": self.eps, "weight_decay": self.weight_decay}

    def load_state_dict(self, state: dict[str, Any], model: Any = None) -> None:
        super().load_state_dict(state, model)
        self.betas = tuple(self.betas)

    def _update(self, entries: list[UpdateEntry], lr: float, grad_scale: float) -> None:
        def step_of(name: str, _: Any) -> int:
            return int(self.state.get(name, {}).get("step", 0))

        for group in group_for_fused_step(entries, step_of, self.state):
            step = step_of(group.names[0], None) + 1
            for name, data in zip(group.names, group.params, strict=True):
                slots = self.state[name]
                if "exp_avg" not in slots:
                    slots["exp_avg"] = group.xp.zeros(data.shape, dtype=data.dtype)
                    slots["exp_avg_sq"] = group.xp.zeros(data.shape, dtype=data.dtype)
                slots["step"] = step
            kernels.multi_adamw_step(
                group.params, group.grads,
                [self.state[n]["exp_avg"] for n in group.names],
                [self.state[n]["exp_avg_sq"] for n in group.names],
                lr=lr, beta1=self.betas[0], beta2=self.betas[1], eps=self.eps,
                weight_decay=self.weight_decay, step=step, grad_scale=grad_scale, decoupled=self.decoupled,
            )
            group.write_back()


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr*wd before the Adam update (default wd 0.01)."""

    decoupled = True

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        super().__init__(lr, betas, eps, weight_decay)

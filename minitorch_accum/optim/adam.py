"""Adam (L2 weight decay) and AdamW (decoupled weight decay), fused, PyTorch's rule."""

from __future__ import annotations

from typing import Any

from minitorch_accum import kernels
from minitorch_accum.optim.fused_groups import group_for_fused_step
from minitorch_accum.optim.hyperparameter_checks import check_positive, check_range, check_rate, params_or_lr
from minitorch_accum.optim.optimizer import Optimizer, Params, UpdateEntry

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr m_hat / (sqrt(v_hat) + eps).

    Weight decay is added to the gradient (L2); AdamW decouples it instead. Both betas
    must lie in [0, 1): beta1 = 1 would never move m from 0 and divide by 1 - b1^t = 0.
    ``Adam(lr=1e-3)`` updates every parameter of the model given to ``step``;
    ``Adam(params, lr=...)`` takes parameters or parameter groups, PyTorch style.
    """

    decoupled = False
    hyperparameter_names = ("lr", "betas", "eps", "weight_decay")
    default_weight_decay = 0.0

    def __init__(self, params: Params | float | None = None, lr: float | None = None, *,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float | None = None) -> None:
        chosen, rate = params_or_lr(type(self).__name__, params, lr)
        super().__init__(chosen, {"lr": 1e-3 if rate is None else rate, "betas": betas, "eps": eps,
                                  "weight_decay": self.default_weight_decay if weight_decay is None else weight_decay})

    def _validated(self, hyperparameters: dict[str, Any]) -> dict[str, Any]:
        h = hyperparameters
        betas = h["betas"]
        if isinstance(betas, str) or not hasattr(betas, "__len__") or len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        return {
            "lr": check_rate("lr", h["lr"]),
            "betas": (check_range("beta1", betas[0], 0.0, 1.0), check_range("beta2", betas[1], 0.0, 1.0)),
            "eps": check_positive("eps", h["eps"]),
            "weight_decay": check_range("weight_decay", h["weight_decay"], 0.0, float("inf")),
        }

    def state_slots(self) -> int:
        """The two moments, exp_avg and exp_avg_sq."""
        return 2

    def state_array_slots(self, settings: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def _update(self, entries: list[UpdateEntry], settings: dict[str, Any], grad_scale: float) -> None:
        def step_of(name: str, _: object) -> int:
            return int(self.state.get(name, {}).get("step", 0))

        beta1, beta2 = settings["betas"]
        for group in group_for_fused_step(entries, step_of, self.state):
            step = step_of(group.names[0], None) + 1
            for name, data in zip(group.names, group.params, strict=True):
                slots = self.state[name]
                if "exp_avg" not in slots:
                    slots["exp_avg"] = group.xp.zeros(data.shape, dtype=data.dtype)
                    slots["exp_avg_sq"] = group.xp.zeros(data.shape, dtype=data.dtype)
                slots["step"] = step
            with self._launch("multi_adamw_step", group, grad_scale):
                kernels.multi_adamw_step(
                    group.params, group.grads,
                    [self.state[n]["exp_avg"] for n in group.names],
                    [self.state[n]["exp_avg_sq"] for n in group.names],
                    lr=settings["lr"], beta1=beta1, beta2=beta2, eps=settings["eps"],
                    weight_decay=settings["weight_decay"], step=step, grad_scale=grad_scale, decoupled=self.decoupled,
                )
            group.write_back()


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr*wd before the Adam update (default wd 0.01)."""

    decoupled = True
    default_weight_decay = 0.01

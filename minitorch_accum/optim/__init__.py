"""Optimizers (``model = opt.step(model, grads)``), clipping and learning-rate schedules."""

from minitorch_accum.optim import lr_scheduler
from minitorch_accum.optim.adam import Adam, AdamW
from minitorch_accum.optim.clip import clip_grad_norm, grad_norm
from minitorch_accum.optim.grad_source import GradientWindow, gradient_window
from minitorch_accum.optim.optimizer import Optimizer
from minitorch_accum.optim.sgd import SGD

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "GradientWindow",
    "Optimizer",
    "clip_grad_norm",
    "grad_norm",
    "gradient_window",
    "lr_scheduler",
]

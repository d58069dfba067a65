"""Checking analytic gradients against central finite differences (float64).

    gradcheck(lambda x, w: (x @ w).tanh().sum(), [x, w])

raises an AssertionError naming the input and the worst element when backward and
the numerical derivative disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from minitorch_accum.autodiff import Tensor

__all__ = ["gradcheck", "numerical_gradient"]


def numerical_gradient(fn: Callable[..., Tensor], inputs: Sequence[Tensor], index: int,
                       eps: float = 1e-6) -> np.ndarray:
    """d fn(inputs).sum() / d inputs[index] by central differences, one element at a time."""
    target = inputs[index]
    values = target.data
    grad = np.zeros(values.shape, dtype=np.float64)
    flat_values = values.reshape(-1)
    flat_grad = grad.reshape(-1)
    for i in range(flat_values.size):
        original = float(flat_values[i])
        flat_values[i] = original + eps
        plus = float(fn(*inputs).data.sum())
        flat_values[i] = original - eps
        minus = float(fn(*inputs).data.sum())
        flat_values[i] = original
        flat_grad[i] = (plus - minus) / (2.0 * eps)
    return grad


def gradcheck(fn: Callable[..., Tensor], inputs: Sequence[Tensor], eps: float = 1e-6,
              atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Compare ``fn(*inputs).sum()``'s backward with central differences for every
    input that requires grad. Inputs must be float64 CPU tensors."""
    for t in inputs:
        if t.requires_grad and t.dtype != np.float64:
            raise TypeError(f"gradcheck needs float64 inputs, got {t.dtype.name}")
    out = fn(*inputs)
    grads = out.sum().backward()
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            continue
        analytic = grads.get(t)
        analytic = np.zeros(t.shape) if analytic is None else np.asarray(analytic, dtype=np.float64)
        numeric = numerical_gradient(fn, inputs, i, eps)
        error = np.abs(analytic - numeric) - (atol + rtol * np.abs(numeric))
        if error.size and error.max() > 0:
            worst = np.unravel_index(int(np.argmax(error)), error.shape)
            raise AssertionError(
                f"gradcheck: input {i} of shape {t.shape}: backward gives {analytic[worst]!r} at {worst}, "
                f"finite differences give {numeric[worst]!r}"
            )

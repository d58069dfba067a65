"""The checks every optimizer's constructor makes of its hyperparameters, with one wording.

Each returns the value as a float (or raises a ValueError that names the hyperparameter);
``params_or_lr`` sorts out the two ways a constructor is called.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["check_flag", "check_number", "check_positive", "check_range", "check_rate", "params_or_lr"]


def params_or_lr(
    optimizer: str, params: object, lr: float | None
) -> tuple[object, float | np.number[Any] | None]:
    """(params, lr) from the two ways to call a constructor: ``SGD(0.1)`` (a number first: the
    rate, for every parameter of the model) and ``SGD(params, lr=0.1)`` (PyTorch's). The params are
    returned as given: the Optimizer's constructor checks them."""
    if isinstance(params, int | float | np.number) and not isinstance(params, bool):
        if lr is not None:
            raise TypeError(f"{optimizer}: got a learning rate twice ({params} and lr={lr}); the first "
                            "argument is either the rate or the parameters")
        return None, params
    return params, lr


def check_number(name: str, value: object) -> float:
    """``value`` as a float; a bool, anything but a real number, NaN and the infinities are refused
    (a NaN or infinite rate, decay or momentum turns every parameter into NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_flag(name: str, value: object) -> bool:
    """``value`` as a bool: True or False (NumPy's too), or the ints 1 and 0."""
    if isinstance(value, bool | np.bool_) or (isinstance(value, int | np.integer) and value in (0, 1)):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def check_positive(name: str, value: object) -> float:
    """A number above 0 (a learning rate, an epsilon)."""
    number = check_number(name, value)
    if not number > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return number


def check_rate(name: str, value: object) -> float:
    """A learning rate: a number at or above 0. PyTorch's SGD and AdamW take 0 (the parameters then
    stay as they are, the optimizer's state still advances), and a schedule may start there (Hugging
    Face's warmup gives the first step 0); a negative rate would climb the loss, so it is refused."""
    number = check_number(name, value)
    if not number >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return number


def check_range(name: str, value: object, low: float, high: float) -> float:
    """A number in [low, high) (a momentum, a beta, a weight decay)."""
    number = check_number(name, value)
    if not low <= number < high:
        raise ValueError(f"{name} must be in [{low}, {high}), got {value!r}")
    return number

"""Testing helpers: a finite-difference gradient check (strategies live in ``.strategies``,
which needs hypothesis)."""

from minitorch_accum.testing.gradcheck import gradcheck, numerical_gradient

__all__ = ["gradcheck", "numerical_gradient"]

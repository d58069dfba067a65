"""Testing helpers: a finite-difference gradient check and accumulation cases.

Hypothesis strategies live in ``strategies`` (tensors, shapes) and
``accumulation_strategies`` (models, splits, whole cases); they need hypothesis.
"""

from minitorch_accum.testing.cases import TIES, Case, ModelSpec, run_full_batch, run_window
from minitorch_accum.testing.gradcheck import gradcheck, numerical_gradient

__all__ = ["TIES", "Case", "ModelSpec", "gradcheck", "numerical_gradient", "run_full_batch", "run_window"]

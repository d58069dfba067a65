"""Testing: check that gradient accumulation is exact for your model, and see it catch real bugs.

    from minitorch_accum.testing import check_accumulation, check_properties
    report = check_accumulation(make_model, loss_fn, (x, y))     # window == big batch, or AccumulationMismatch
    report = check_properties(make_model, loss_fn, (x, y))       # and every other property

- the equivalence API: ``check_accumulation``, ``check_properties``, ``AccumulationReport``,
  ``AccumulationMismatch``, the ``PROPERTIES`` by name, ``Recipe`` (how micro-batches become steps,
  with the hooks a faulty recipe overrides), ``Subject`` (model factory, loss, batch),
  ``rounding_bound`` (for any Module), ``run_ranks`` (data-parallel ranks on threads);
- the bug museum: ``minitorch_accum.testing.bugs`` (``maccum bugs list``);
- the pytest plugin: ``minitorch_accum.testing.pytest_plugin`` (the ``accumulation_equivalence``
  fixture and the ``accumulation`` marker), loaded when the package is installed;
- hypothesis strategies and profiles (the ``test`` extra): ``splits``, ``windows``, ``batches``
  (``accumulation_strategies``, with ``cases`` and ``model_specs``), ``strategies`` (tensors,
  shapes), ``CI_PROFILE``/``DEV_PROFILE``; they load on first use, so this package imports without
  hypothesis;
- the library's own cases (``Case``, ``ModelSpec``, ``run_window``, ``run_full_batch``) and
  ``gradcheck``.
"""

from typing import Any

from minitorch_accum.testing.cases import TIES, Case, ModelSpec, run_full_batch, run_window
from minitorch_accum.testing.check_context import Window
from minitorch_accum.testing.equivalence import (
    AccumulationReport,
    check_accumulation,
    check_properties,
    default_splits,
)
from minitorch_accum.testing.gradcheck import gradcheck, numerical_gradient
from minitorch_accum.testing.properties import PROPERTIES
from minitorch_accum.testing.property_results import AccumulationMismatch, PropertyResult
from minitorch_accum.testing.recipes import Recipe
from minitorch_accum.testing.rounding import rounding_bound
from minitorch_accum.testing.simulated_ranks import run_ranks
from minitorch_accum.testing.subject import Subject

#: names that need hypothesis, and the module each comes from
_WITH_HYPOTHESIS = {
    "splits": "accumulation_strategies", "windows": "accumulation_strategies", "batches": "accumulation_strategies",
    "CI_PROFILE": "profiles", "DEV_PROFILE": "profiles", "register_profiles": "profiles",
}

__all__ = ["CI_PROFILE", "DEV_PROFILE", "PROPERTIES", "TIES", "AccumulationMismatch", "AccumulationReport", "Case",
           "ModelSpec", "PropertyResult", "Recipe", "Subject", "Window", "batches", "check_accumulation",
           "check_properties", "default_splits", "gradcheck", "numerical_gradient", "register_profiles",
           "rounding_bound", "run_full_batch", "run_ranks", "run_window", "splits", "windows"]


def __getattr__(name: str) -> Any:
    module = _WITH_HYPOTHESIS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

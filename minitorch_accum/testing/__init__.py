"""Testing: check that gradient accumulation is exact for your model, and see it catch real bugs.

    from minitorch_accum.testing import check_accumulation, check_properties
    report = check_accumulation(make_model, loss_fn, (x, y))     # window == big batch, or AccumulationMismatch
    report = check_properties(make_model, loss_fn, (x, y))       # and every other property

- the equivalence API: ``check_accumulation``, ``check_properties``, ``AccumulationReport``,
  ``AccumulationMismatch``, the ``PROPERTIES`` by name, ``Recipe`` (how micro-batches become steps,
  with the hooks a faulty recipe overrides), ``Subject`` (model factory, loss, batch),
  ``rounding_bound`` (for any Module), ``run_ranks`` (data-parallel ranks on threads);
- your own loop: ``check_training_loop(make_loop, batch)`` and ``Loop`` (``training_loop.py``), and
  for PyTorch loops and models ``minitorch_accum.testing.torch`` (torch an optional extra);
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

import importlib
from collections.abc import Callable
from typing import Any

#: every public name, and the module it lives in; each loads on first use (PEP 562), so that
#: importing the pytest plugin, or this package without hypothesis, loads nothing it does not need
_HOMES = {
    "TIES": "cases", "Case": "cases", "ModelSpec": "cases", "run_full_batch": "cases", "run_window": "cases",
    "Window": "check_context",
    "AccumulationReport": "equivalence", "check_accumulation": "equivalence", "check_properties": "equivalence",
    "default_splits": "equivalence",
    "gradcheck": "gradcheck", "numerical_gradient": "gradcheck",
    "PROPERTIES": "properties",
    "AccumulationMismatch": "property_results", "PropertyResult": "property_results",
    "Recipe": "recipes",
    "rounding_bound": "rounding",
    "run_ranks": "simulated_ranks",
    "Subject": "subject",
    "Loop": "training_loop", "check_training_loop": "training_loop",
    # these need hypothesis (the test extra)
    "splits": "accumulation_strategies", "windows": "accumulation_strategies", "batches": "accumulation_strategies",
    "CI_PROFILE": "profiles", "DEV_PROFILE": "profiles", "register_profiles": "profiles",
}

__all__ = sorted(_HOMES)


def _lazy_exports(namespace: dict[str, Any], homes: dict[str, str]) -> tuple[Callable[[str], Any],
                                                                             Callable[[], list[str]]]:
    """PEP 562's ``__getattr__`` and ``__dir__`` for the package whose globals are ``namespace``: each
    name of ``homes`` loads from its module on first use and is kept. ``minitorch_accum.testing.torch``
    takes them from here too (this package is loaded before it anyway)."""
    package = namespace["__name__"]

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    def names() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return load, names


__getattr__, __dir__ = _lazy_exports(globals(), _HOMES)

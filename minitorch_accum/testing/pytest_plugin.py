"""The pytest plugin: the ``accumulation_equivalence`` fixture and the ``accumulation`` marker.

Installed with the package (entry point ``pytest11``, name ``minitorch_accum``), so any test
suite can write:

    def test_my_model_accumulates_exactly(accumulation_equivalence):
        accumulation_equivalence(make_model, loss_fn, (x, y))     # every property; raises on a mismatch

    @pytest.mark.accumulation(dtype="float32", splits=[(3, 1, 4)], properties=["window_equals_full_batch"])
    def test_in_float32(accumulation_equivalence):
        accumulation_equivalence(make_model, loss_fn, (x, y))

The marker's keywords are the fixture's defaults for that test (any keyword of
``check_properties``: ``dtype``, ``splits``, ``properties``, ``seed``, ``allow_inconclusive``...);
``pytest -m accumulation`` selects the marked tests. The splits are the same on every run, and a
failure ends with the ``replay:`` line that reruns it. Loading the plugin
also registers the hypothesis profiles ``minitorch_accum-ci`` and ``minitorch_accum-dev``
(``pytest --hypothesis-profile=minitorch_accum-ci``). To run a suite without it:
``pytest -p no:minitorch_accum``.

When torch is installed, the plugin also registers ``minitorch_accum.testing.torch.pytest_fixture``:
the fixture ``torch_accumulation_equivalence`` checks a PyTorch loop (``docs/equivalence.md``).
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from minitorch_accum.testing.marker_defaults import MARKER, marker_defaults

if TYPE_CHECKING:  # the library itself loads when a test first calls the fixture, not with pytest
    from minitorch_accum.nn import Module
    from minitorch_accum.testing.equivalence import AccumulationReport
    from minitorch_accum.testing.subject import LossFn

with contextlib.suppress(ImportError):  # the profiles need hypothesis (the test extra), the fixture does not
    from minitorch_accum.testing import profiles as _profiles  # noqa: F401 (registers them on import)

__all__ = ["AccumulationEquivalence", "accumulation_equivalence", "pytest_configure"]


class AccumulationEquivalence:
    """What the fixture gives: call it with a model factory, a loss and a batch to run every property
    (``check_properties``); the test's ``accumulation`` marker supplies default keywords."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        #: every report this test produced, in order
        self.reports: list[AccumulationReport] = []

    def __call__(self, model_factory: Callable[[], Module], loss_fn: LossFn, batch: Any,
                 **options: Any) -> AccumulationReport:
        from minitorch_accum.testing.equivalence import check_properties

        report = check_properties(model_factory, loss_fn, batch, **{**self.defaults, **options})
        self.reports.append(report)
        return report


def pytest_configure(config: pytest.Config) -> None:
    if importlib.util.find_spec("torch") is not None:  # finds torch without importing it
        config.pluginmanager.import_plugin("minitorch_accum.testing.torch.pytest_fixture")
    config.addinivalue_line("markers", f"{MARKER}(**options): a gradient-accumulation equivalence test; the "
                                       "options are the accumulation_equivalence fixture's defaults "
                                       "(dtype=, splits=, properties=, seed=, allow_inconclusive=, rtol=, "
                                       "reduction=, fusion=)")


@pytest.fixture
def accumulation_equivalence(request: pytest.FixtureRequest) -> AccumulationEquivalence:
    """Check gradient accumulation on your model: ``accumulation_equivalence(make_model, loss_fn, batch)``."""
    return AccumulationEquivalence(marker_defaults(request, "dtype=, splits=, ..."))

"""The fixture ``torch_accumulation_equivalence``: the package's pytest plugin registers this module
when torch is installed (it imports neither torch nor the library until a test calls the fixture).

    def test_my_loop(torch_accumulation_equivalence):
        torch_accumulation_equivalence(make_loop, (x, y))                  # check_training_loop
        torch_accumulation_equivalence.module(make_model, loss_fn, (x, y))  # check_module

The test's ``accumulation`` marker supplies default keywords (``splits=``, and ``windows=`` for a loop).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from minitorch_accum.testing.marker_defaults import marker_defaults

if TYPE_CHECKING:
    from minitorch_accum.testing.equivalence import AccumulationReport

__all__ = ["TorchAccumulationEquivalence", "torch_accumulation_equivalence"]

_MODULE_OPTIONS = ("splits", "raise_on_failure")


class TorchAccumulationEquivalence:
    """Call it with ``make_loop`` and a batch to check your torch loop; ``.module(...)`` checks a Module."""

    def __init__(self, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        #: every report this test produced, in order
        self.reports: list[AccumulationReport] = []

    def __call__(self, make_loop: Callable[[int], Any], batch: Any, **options: Any) -> AccumulationReport:
        from minitorch_accum.testing.torch.loop import check_training_loop

        report = check_training_loop(make_loop, batch, **{**self.defaults, **options})
        self.reports.append(report)
        return report

    def module(self, model_factory: Callable[[], Any], loss_fn: Callable[[Any, Any], Any], batch: Any,
               **options: Any) -> AccumulationReport:
        from minitorch_accum.testing.torch.module_check import check_module

        defaults = {k: v for k, v in self.defaults.items() if k in _MODULE_OPTIONS}
        report = check_module(model_factory, loss_fn, batch, **{**defaults, **options})
        self.reports.append(report)
        return report


@pytest.fixture
def torch_accumulation_equivalence(request: pytest.FixtureRequest) -> TorchAccumulationEquivalence:
    """Check your PyTorch loop: ``torch_accumulation_equivalence(make_loop, batch)``."""
    return TorchAccumulationEquivalence(marker_defaults(request, "splits=, windows=, ..."))

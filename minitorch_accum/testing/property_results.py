"""What an equivalence property reports: per parameter the worst gap against its tolerance, why
that tolerance, and a verdict (passed, failed, not expected to be equal, or not applicable)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from minitorch_accum.testing.parameter_bound import Tolerance

__all__ = ["FAILED", "INEXACT", "PASSED", "SKIPPED", "AccumulationMismatch", "PropertyResult", "Worst"]

PASSED, FAILED, INEXACT, SKIPPED = "passed", "failed", "not expected to be equal", "not applicable"


@dataclass(frozen=True)
class Worst:
    """A parameter's worst element over every scenario a property ran."""

    ratio: float  # gap / tolerance at the element furthest over (or closest to) its tolerance; above 1 fails
    gap: float  # the gap there
    tolerance: float  # the tolerance there
    scenario: str
    why: str = ""  # how that tolerance was derived
    max_gap: float = 0.0  # the largest gap of any element, in any scenario


class AccumulationMismatch(AssertionError):  # noqa: N818 (an assertion, named as pytest users read it)
    """A property failed: names the property, the parameter, the split (scenario) and the gap."""

    def __init__(self, result: PropertyResult) -> None:
        self.result = result
        name, worst = result.worst_parameter()
        self.property = result.name
        self.parameter = name
        self.scenario = worst.scenario
        self.gap = worst.gap
        self.tolerance = worst.tolerance
        super().__init__(
            f"{result.name}: parameter {name!r} differs by {worst.gap:.3e} (tolerance {worst.tolerance:.3e}, "
            f"{worst.ratio:.3g}x it) with {worst.scenario}; tolerance: {worst.why or result.why}")


@dataclass
class PropertyResult:
    """One property on one subject: the verdict, the worst gap per parameter and the tolerance's why."""

    name: str
    claim: str
    why: str = ""
    status: str = PASSED
    worst: dict[str, Worst] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def compare(self, got: dict[str, np.ndarray], expected: dict[str, np.ndarray], tolerance: Tolerance,
                scenario: str) -> None:
        """Fold one scenario's gaps into the worst per parameter (strictly worse replaces)."""
        for name, want in expected.items():
            gap = np.abs(np.asarray(got[name], dtype=np.float64) - want)
            ratio, value, bound = tolerance.excess(name, gap)
            largest = float(np.max(np.where(np.isnan(gap), np.inf, gap), initial=0.0))
            old = self.worst.get(name)
            if old is None or ratio > old.ratio or (ratio == old.ratio and value > old.gap):
                self.worst[name] = Worst(ratio, value, bound, scenario, tolerance.why,
                                         max(largest, old.max_gap if old else 0.0))
            else:
                self.worst[name] = replace(old, max_gap=max(largest, old.max_gap))
        self.why = self.why or tolerance.why

    def settle(self, inexact: list[str] | None = None) -> PropertyResult:
        """The verdict: failed when any ratio exceeds 1, unless the model is inexact by nature."""
        if self.status == SKIPPED:
            return self
        if inexact:
            self.status = INEXACT
            self.notes.extend(inexact)
        elif any(w.ratio > 1.0 for w in self.worst.values()):
            self.status = FAILED
        else:
            self.status = PASSED
        return self

    @property
    def passed(self) -> bool:
        """True unless the property failed (inexact and not applicable do not fail)."""
        return self.status != FAILED

    @property
    def max_gap(self) -> float:
        """The largest gap of any element of any parameter."""
        return max((w.max_gap for w in self.worst.values()), default=0.0)

    def gaps(self) -> dict[str, float]:
        """The largest gap per parameter (any element, any scenario)."""
        return {name: w.max_gap for name, w in self.worst.items()}

    def worst_parameter(self) -> tuple[str, Worst]:
        if not self.worst:
            return "", Worst(0.0, 0.0, 0.0, "no scenario")
        return max(self.worst.items(), key=lambda item: (item[1].ratio, item[1].gap))

    def raise_if_failed(self) -> PropertyResult:
        if self.status == FAILED:
            raise AccumulationMismatch(self)
        return self

    def summary(self) -> str:
        """One line: the verdict, the worst gap and where."""
        if self.status == SKIPPED:
            return f"{self.name}: {self.status} ({'; '.join(self.notes)})"
        name, worst = self.worst_parameter()
        line = (f"{self.name}: {self.status}; max gap {self.max_gap:.3e}; closest to its tolerance: {name}, gap "
                f"{worst.gap:.3e} against {worst.tolerance:.3e} ({worst.ratio:.3g} of it) with {worst.scenario}")
        return line + (f" [{'; '.join(self.notes)}]" if self.notes else "")

"""What an equivalence property reports: per parameter the worst gap against its tolerance, why
that tolerance, and a verdict: passed, failed, inconclusive (the model cannot match the big
batch by its nature: not a pass), or not applicable (nothing was compared)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from minitorch_accum.testing.parameter_bound import Tolerance

__all__ = ["FAILED", "INEXACT", "PASSED", "SKIPPED", "AccumulationMismatch", "PropertyResult", "Worst"]

PASSED, FAILED, INEXACT, SKIPPED = "passed", "failed", "inconclusive", "not applicable"


@dataclass(frozen=True)
class Worst:
    """A parameter's worst element over every scenario a property ran."""

    ratio: float  # gap / tolerance at the element furthest over (or closest to) its tolerance; above 1 fails
    gap: float  # the gap there
    tolerance: float  # the tolerance there
    scenario: str
    why: str = ""  # how that tolerance was derived
    max_gap: float = 0.0  # the largest gap of any element, in any scenario
    split: tuple[int, ...] | None = None  # the scenario's micro-batch sizes, for the replay line


class AccumulationMismatch(AssertionError):  # noqa: N818 (an assertion, named as pytest users read it)
    """A property failed or was inconclusive: names the property, the parameter, the split (scenario)
    and the gap, or the reason, and ends with the line that replays it."""

    def __init__(self, result: PropertyResult, notes: tuple[str, ...] | list[str] = ()) -> None:
        self.result = result
        name, worst = result.worst_parameter()
        self.property = result.name
        self.parameter = name
        self.scenario = worst.scenario
        self.gap = worst.gap
        self.tolerance = worst.tolerance
        self.replay = result.replay
        tail = []
        if result.error is not None:
            head = (f"{result.name}: failed: the property raised {type(result.error).__name__}: {result.error}"
                    + (f" (worst gap before it: parameter {name!r}, {worst.gap:.3e})" if result.worst else ""))
        elif result.status == INEXACT:
            head = (f"{result.name}: inconclusive: {'; '.join(result.notes)}; an inconclusive property fails the "
                    "check unless allow_inconclusive=True")
        else:
            head = (f"{result.name}: parameter {name!r} differs by {worst.gap:.3e} (tolerance {worst.tolerance:.3e}, "
                    f"{worst.ratio:.3g}x it) with {worst.scenario}")
            extra = [n for n in result.notes if n not in notes]
            if extra:
                head += f" [{'; '.join(extra)}]"
            tail.append(f"tolerance: {worst.why or result.why}")
        lines = [head] + [f"note: {n}" for n in notes if n not in result.notes] + tail
        if self.replay:
            lines.append(f"replay: {self.replay}")
        super().__init__("\n".join(lines))


@dataclass
class PropertyResult:
    """One property on one subject: the verdict, the worst gap per parameter and the tolerance's why."""

    name: str
    claim: str
    why: str = ""
    status: str = PASSED
    worst: dict[str, Worst] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: what the property raised, when it could not finish (a faulty recipe that crashes fails it)
    error: BaseException | None = None
    #: the keywords that rerun this property on its worst split (``check_properties(..., <replay>)``)
    replay: str = ""

    def compare(self, got: dict[str, np.ndarray], expected: dict[str, np.ndarray], tolerance: Tolerance,
                scenario: str, split: tuple[int, ...] | None = None) -> None:
        """Fold one scenario's gaps into the worst per parameter (strictly worse replaces; a NaN ratio
        is the worst there is)."""
        for name, want in expected.items():
            gap = np.abs(np.asarray(got[name], dtype=np.float64) - want)
            ratio, value, bound = tolerance.excess(name, gap)
            largest = float(np.max(np.where(np.isnan(gap), np.inf, gap), initial=0.0))
            old = self.worst.get(name)
            ratio = np.inf if np.isnan(ratio) else ratio
            if old is None or ratio > old.ratio or (ratio == old.ratio and value > old.gap):
                self.worst[name] = Worst(ratio, value, bound, scenario, tolerance.why,
                                         max(largest, old.max_gap if old else 0.0), split)
            else:
                self.worst[name] = replace(old, max_gap=max(largest, old.max_gap))
        self.why = self.why or tolerance.why

    def settle(self, inexact: list[str] | None = None) -> PropertyResult:
        """The verdict: failed when any ratio exceeds 1 (or is NaN), inconclusive when the model cannot
        match the big batch by nature, not applicable when nothing was compared."""
        if self.status == SKIPPED:
            return self
        if inexact:
            self.status = INEXACT
            self.notes.extend(inexact)
        elif not self.worst:
            self.status = SKIPPED
            self.notes.append("nothing was compared (the model has no parameters)")
        elif any(not w.ratio <= 1.0 for w in self.worst.values()):
            self.status = FAILED
        else:
            self.status = PASSED
        return self

    def crashed(self, error: BaseException) -> PropertyResult:
        """The property raised before its verdict: it failed, with the error as its cause."""
        self.status = FAILED
        self.error = error
        self.notes.append(f"raised {type(error).__name__}: {error}")
        return self

    @property
    def passed(self) -> bool:
        """True when the property compared and held, or did not apply; False when it failed or was
        inconclusive (an inconclusive property compared nothing it could trust)."""
        return self.status in (PASSED, SKIPPED)

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

    def raise_if_failed(self, allow_inconclusive: bool = False) -> PropertyResult:
        """Raise ``AccumulationMismatch`` when the property failed (or was inconclusive, unless allowed)."""
        if self.status == FAILED or (self.status == INEXACT and not allow_inconclusive):
            raise AccumulationMismatch(self) from self.error
        return self

    def summary(self) -> str:
        """One line: the verdict, the worst gap and where."""
        if self.status == SKIPPED or (self.error is not None and not self.worst):
            return f"{self.name}: {self.status} ({'; '.join(self.notes)})"
        if self.status == INEXACT:
            return (f"{self.name}: {self.status}; max gap {self.max_gap:.3e}, against no tolerance "
                    f"[{'; '.join(self.notes)}]")
        name, worst = self.worst_parameter()
        line = (f"{self.name}: {self.status}; max gap {self.max_gap:.3e}; closest to its tolerance: {name}, gap "
                f"{worst.gap:.3e} against {worst.tolerance:.3e} ({worst.ratio:.3g} of it) with {worst.scenario}")
        return line + (f" [{'; '.join(self.notes)}]" if self.notes else "")

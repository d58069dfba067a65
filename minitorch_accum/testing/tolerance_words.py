"""How ``maccum bugs show`` words a measured gap and its tolerance for a student: a plain sentence
first, then the formula the property derived it from; no tolerance where the property is not
expected to hold, and no share of a gap too small for a percentage to show."""

from __future__ import annotations

from minitorch_accum.testing.property_results import Worst

__all__ = ["gap_words", "share_of_largest", "tolerance_words"]

#: what each property's tolerance is, in one sentence a student reads before its formula
_PLAIN = {
    "window_equals_full_batch": "the most that rounding alone can move the window's gradient from the big batch's "
                                "(they add the same numbers in another order, so each entry may differ by a few "
                                "roundings and no more; a bug moves it far further)",
    "data_parallel_equals_one_rank": "the most that rounding alone can move the ranks' summed gradient from one "
                                     "process's (the same numbers, added in another order)",
    "clipping_uses_the_window_norm": "the most that rounding alone can move the clipped window gradient from the "
                                     "clipped big batch's",
    "steps_equal_big_batch": "how far rounding alone may let the parameters of k x b and k*b drift apart over the "
                             "optimizer steps: half the dtype's digits of each parameter's movement",
}


def share_of_largest(gap: float, largest: float) -> str:
    """``gap`` read against the largest gradient entry: a percentage, or where that would print as
    0.00% the ratio itself (1.1e-07 of it); nothing when there is no entry to read it against."""
    if not largest:
        return ""
    share = gap / largest
    said = f"{share:.2%}" if share >= 5e-5 or share == 0 else f"{share:.1e}"
    return f" ({said} of the largest gradient entry, {largest:.3e})"


def gap_words(status: str, name: str, worst: Worst, relative: str, inexact: bool) -> str:
    """The faulty run's line after its label: its verdict, the largest gap and, for a property
    expected to hold, the element furthest over its tolerance."""
    line = f"{status}; max gap {worst.max_gap:.3e} in {name}{relative}"
    if inexact:
        return line  # no tolerance to be over: the gap is shown, not judged
    allowed = "0 (exact equality asked for)" if worst.tolerance == 0 else f"{worst.tolerance:.3e}"
    return f"{line}; furthest over its tolerance: {worst.gap:.3e} against {allowed}, with {worst.scenario}"


def tolerance_words(prop: str, why: str, inexact: bool) -> str:
    """The tolerance line after ``tolerance: ``: one plain sentence, then how it was derived."""
    if inexact:
        return ("none: this property is not expected to hold for this model (see why: above), so its gap is shown "
                "and held against no tolerance")
    plain = _PLAIN.get(prop)
    if plain is None:  # an exact count's why is plain already
        return why
    return f"{plain}. Derived as: {why}" if why else plain

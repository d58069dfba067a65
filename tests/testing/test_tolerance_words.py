"""How ``maccum bugs show`` words a gap and its tolerance: no tolerance where none applies, no 0.00%,
a plain sentence before the formula."""

from __future__ import annotations

from minitorch_accum.testing import bugs
from minitorch_accum.testing.property_results import Worst
from minitorch_accum.testing.tolerance_words import gap_words, share_of_largest, tolerance_words

FORMULA = "rounding bound for float64 (u = 2^-53) and k = 4: (2 gamma_36 + k u) sum_r |g_r| / N ..."


def test_a_share_too_small_for_a_percentage_is_said_as_a_ratio() -> None:
    assert share_of_largest(1.041e-8, 9.415e-2) == " (1.1e-07 of the largest gradient entry, 9.415e-02)"
    assert share_of_largest(2.143e-2, 3.059e-1) == " (7.01% of the largest gradient entry, 3.059e-01)"
    assert share_of_largest(1.0, 0.0) == ""  # no entry to read a gap against


def test_an_inexact_property_has_no_tolerance_to_be_over() -> None:
    worst = Worst(float("inf"), 0.225, 0.0, "split (3, 2, 3, 4)", "none", max_gap=0.7626)
    line = gap_words("not expected to be equal", "0.weight", worst, "", inexact=True)
    assert line == "not expected to be equal; max gap 7.626e-01 in 0.weight"
    said = tolerance_words("window_equals_full_batch", "none: the model is not expected to match", inexact=True)
    assert said.startswith("none: this property is not expected to hold for this model")
    assert "against" not in line and "0.000e+00" not in line


def test_an_exact_tolerance_says_equality_is_asked_for() -> None:
    worst = Worst(float("inf"), 8.0, 0.0, "rows 0:8", "exact: an item count is an integer", max_gap=8.0)
    line = gap_words("failed", "loss_fn's item count", worst, "", inexact=False)
    assert line.endswith("furthest over its tolerance: 8.000e+00 against 0 (exact equality asked for), with rows 0:8")


def test_a_rounding_bound_is_said_plainly_before_its_formula() -> None:
    said = tolerance_words("window_equals_full_batch", FORMULA, inexact=False)
    plain, formula = said.split(". Derived as: ")
    assert plain.startswith("the most that rounding alone can move the window's gradient")
    assert "gamma" not in plain and formula == FORMULA
    assert tolerance_words("a_property_of_its_own", FORMULA, inexact=False) == FORMULA


def test_bugs_show_says_the_true_thing_of_batch_norm() -> None:
    text = bugs.describe(bugs.measure(bugs.exhibit("batch_norm_statistics")))
    faulty = next(line for line in text.splitlines() if line.startswith("  faulty recipe:"))
    assert "furthest over its tolerance" not in faulty and "0.000e+00" not in faulty
    assert "  tolerance: none: this property is not expected to hold for this model" in text
    assert "tolerance: none: the model" not in text

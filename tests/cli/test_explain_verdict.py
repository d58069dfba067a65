"""maccum explain's verdict is computed from what happened: equal, or which cause made the gap."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from minitorch_accum.cli import main
from minitorch_accum.cli.explain_command import explain_window
from minitorch_accum.cli.explain_verdict import ALGEBRA, WindowCheck, check_window, item_weights, verdict_lines


def _explain(dataset: str = "digits", reduction: str = "items", model: str = "task", k: int = 3,
             b: int = 4) -> tuple[WindowCheck, str]:
    report = explain_window(dataset, k, b, reduction, "gemm", "float64", seed=0, model_name=model)
    check = report["check"]
    return check, "\n".join(verdict_lines(check))


def test_items_is_equal_within_rounding_and_says_why() -> None:
    check, text = _explain()
    assert check.gap <= check.tolerance
    assert text.startswith("verdict: EQUAL within rounding")
    assert "divides by its 12 items" in text and "only the order of the additions differs" in text
    assert ALGEBRA in text


def test_mean_over_equal_micro_batches_is_equal_and_says_each_item_weighs_1_over_n() -> None:
    check, text = _explain(reduction="mean")
    assert check.sizes == [4, 4, 4] and check.gap <= check.tolerance
    assert text.startswith("verdict: EQUAL") and "1/(3 x 4) = 1/12" in text
    assert "uneven" not in text and "price" not in text


def test_mean_over_uneven_micro_batches_shows_the_sizes_and_the_weights() -> None:
    check, text = _explain(dataset="sequences", reduction="mean", b=2)
    assert len(set(check.sizes)) > 1
    assert check.gap > check.tolerance >= check.weighted_gap  # weighing the big batch so closes the gap
    assert text.startswith("verdict: NOT EQUAL") and "a mean of means" in text
    assert f"sizes {', '.join(map(str, check.sizes))}" in text
    weights = ", ".join(f"1/{3 * n}" for n in check.sizes)
    assert f"1/(k n_j) = {weights}" in text and f"1/N = 1/{sum(check.sizes)}" in text


def _causes(text: str) -> list[str]:
    """The numbered causes printed after a NOT EQUAL verdict's "and here is why:"."""
    lines = text.splitlines()
    assert lines[0].endswith("and here is why:"), lines[0]
    return [line for line in lines[1:] if line.startswith("  ") and line.strip()[:2].rstrip(".").isdigit()]


def test_mean_nominal_over_uneven_micro_batches_names_the_mean_of_means() -> None:
    check, text = _explain(dataset="sequences", reduction="mean_nominal", k=4, b=8)
    assert len(set(check.sizes)) > 1 and len(check.sizes) == 4
    assert check.gap > check.tolerance >= check.weighted_gap
    (cause,) = _causes(text)  # the verdict that said "here is why" says it
    weights = ", ".join(f"1/{4 * n}" for n in check.sizes)
    assert "a mean of means" in cause and f"1/(K n_j) = {weights} (K = 4)" in cause
    assert "configured K = 4 micro-batches whatever the window holds" not in text  # the window holds 4


def test_mean_nominal_over_equal_micro_batches_says_it_divides_by_k_not_by_the_items() -> None:
    check, text = _explain(reduction="mean_nominal", k=4, b=8)
    assert check.sizes == [8] * 4 and check.gap <= check.tolerance
    assert text.startswith("verdict: EQUAL")
    assert "by the configured K = 4, which the window holds, so each item weighs 1/(4 x 8) = 1/32" in text
    assert "divides by its 32 items" not in text


def test_mean_nominal_on_a_short_window_names_the_configured_k() -> None:
    # digits holds 1438 rows: micro-batches of 719 make an epoch of 2, short of the configured 3
    check, text = _explain(reduction="mean_nominal", k=3, b=719)
    assert check.sizes == [719, 719] and check.ratio == pytest.approx(2 / 3, rel=1e-9)
    (cause,) = _causes(text)
    assert "divides by the configured K = 3 micro-batches whatever the window holds, and this window holds 2" in cause
    assert "the window is 2/3 of the big batch's gradient" in cause and "mean of means" not in cause


def test_sum_is_unequal_because_nothing_divides_and_measures_the_factor() -> None:
    check, text = _explain(reduction="sum")
    assert check.ratio == pytest.approx(12, rel=1e-9)
    assert check.weighted_gap <= check.tolerance < check.gap
    assert "reduction=sum divides by nothing" in text and "N = 12 times" in text
    assert "mean of means" not in text


def test_batchnorm_is_unequal_because_it_couples_the_items() -> None:
    check, text = _explain(model="batchnorm")
    assert check.gap > check.tolerance
    assert [(layer.kind, layer.modules) for layer in check.layers] == [("batchnorm", ["1"])]
    assert check.layers[0].gap <= check.tolerance  # on its running statistics the window is the big batch
    assert "BatchNorm couples the items" in text and "1. the normalization" not in text


def test_dropout_is_unequal_because_the_masks_differ() -> None:
    check, text = _explain(model="dropout")
    assert [layer.kind for layer in check.layers] == ["dropout"] and check.layers[0].gap <= check.tolerance
    assert "the dropout masks differ" in text and "BatchNorm couples" not in text


def test_a_gap_no_cause_explains_is_called_a_bug() -> None:
    # a window gradient that is off for no reason: every test removes nothing, the verdict says so
    report = explain_window("digits", 3, 4, "items", "gemm", "float64", seed=0)
    check: WindowCheck = report["check"]
    assert check.gap <= check.tolerance
    from minitorch_accum.cli.tasks import load_task
    from minitorch_accum.data import DataLoader

    task = load_task("digits", dtype="float64")
    loader = DataLoader(task.train, 4, shuffle=True, seed=0)
    batches = [loader.batch(0, i) for i in range(3)]
    x_all, y_all = task.train.get_batch(loader.order(0)[:12])
    off: dict[str, Any] = {name: np.zeros(p.shape) + 1e-3 for name, p in task.model.named_parameters()}
    planted = check_window(task.model, batches, off, x_all, y_all, "items", "gemm", "float64")
    text = "\n".join(verdict_lines(planted))
    assert "NOT EQUAL" in text and "would be a bug to report" in text


def test_item_weights_spell_out_each_normalization() -> None:
    assert item_weights("items", [2, 6]) == [1 / 8, 1 / 8]
    assert item_weights("mean", [2, 6]) == [1 / 4, 1 / 12]
    assert item_weights("sum", [2, 6]) == [1.0, 1.0]
    assert item_weights("mean_nominal", [2, 6], nominal=4) == [1 / 8, 1 / 24]  # a short window of 2 of 4
    with pytest.raises(ValueError, match="no item weights known for reduction 'median'"):
        item_weights("median", [2, 6])


def test_the_models_flag_is_for_digits(capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", "--dataset", "sequences", "--model", "batchnorm"]) == 2
    assert "--model batchnorm is a variant of the digits MLP" in capsys.readouterr().err


def test_a_k_beyond_the_data_says_what_ran(capsys: pytest.CaptureFixture) -> None:
    assert main(["explain", "--accum", "100000", "--micro-batch", "512"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("One window of k=3 micro-batches of 512 items")
    assert "--accum 100000 asked for more micro-batches than the training set holds: 3 micro-batches" in out

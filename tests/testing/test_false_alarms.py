"""A fast slice of the false-alarm measurement (``python -m minitorch_accum.testing.false_alarms``):
every family of the corpus, both dtypes, every property, no false alarm; the museum's bugs on two
families, every one caught."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitorch_accum.testing import false_alarms
from minitorch_accum.testing.false_alarm_corpus import FAMILIES
from minitorch_accum.testing.properties import PROPERTIES
from minitorch_accum.testing.property_results import PASSED


def test_the_corpus_holds_the_families_the_issue_names() -> None:
    assert len(FAMILIES) >= 10
    assert {"attention_key_bias", "tiny_lm_fused_qkv_tied", "bias_before_layer_norm", "tied_square_linear",
            "padded_embeddings", "residual_layer_norm", "gelu_tanh_mlp"} <= set(FAMILIES)


@pytest.mark.parametrize("index", range(2 * len(FAMILIES)))
def test_a_correct_model_of_the_corpus_passes_every_property(index: int) -> None:
    run = false_alarms.correct_run(index)
    assert set(run.statuses.values()) == {PASSED}, run
    assert all(ratio <= 1.0 for ratio in run.ratios.values())


@pytest.mark.parametrize("family", ["attention_key_bias", "relu_mlp_dropout"])
def test_every_museum_bug_is_caught_on_the_corpus(family: str) -> None:
    runs = false_alarms.bug_runs(family)
    assert {r.dtype for r in runs} == {"float32", "float64"} and len(runs) >= 19
    assert [r for r in runs if not r.caught] == []


def test_the_program_prints_and_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "table.json"
    assert false_alarms.main(["--runs", "3", "--no-bugs", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| family | dtype | property | runs | false alarms | inconclusive | worst gap / bound |" in printed
    checks = 3 * len(PROPERTIES)  # every property of the registry, on each run
    assert f"false alarms: 0 of {checks} property checks" in printed
    written = json.loads(out.read_text())
    assert len(written["runs"]) == 3 and written["command"].endswith("--runs 3 --no-bugs --out " + str(out))
    assert sum(row["runs"] for row in written["table"]) == checks
    assert {row["property"] for row in written["table"]} == set(PROPERTIES)

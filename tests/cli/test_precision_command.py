"""``maccum precision``: the table, the JSON and the log-log figure of error against k."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.cli import main
from minitorch_accum.cli.precision_command import parse_ks
from minitorch_accum.cli.precision_figure import precision_figure
from minitorch_accum.observe.precision import INPUT_ROUNDING, ROWS, PrecisionRow, PrecisionStudy, default_ks
from tests.drawn_overlap import covered


def test_k_lists_double_through_an_ellipsis() -> None:
    assert parse_ks("1,2,4,...,64") == [1, 2, 4, 8, 16, 32, 64]
    assert parse_ks("3, 1,5") == [1, 3, 5]
    for bad in ("0,2", "1,...", "two", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_ks(bad)


def test_precision_prints_the_table_and_writes_json_and_a_figure(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    assert main(["precision", "--k", "1,2,...,16", "--micro-batch", "4", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name, _, _ in ROWS:
        assert name in out
    assert "k=16" in out and "wrote" in out
    assert "a bfloat16 buffer rounded stochastically is" in out
    record = json.loads((tmp_path / "precision.json").read_text())
    assert record["ks"] == [1, 2, 4, 8, 16] and record["model"] == "mlp" and record["micro_batch"] == 4
    rows = {r["name"]: r for r in record["rows"]}
    assert set(rows) == {name for name, _, _ in ROWS} | {INPUT_ROUNDING}
    assert rows["float64"]["eps"] == pytest.approx(2.0**-52) and rows["bf16 -> bf16"]["eps"] == 2.0**-7
    assert all(0 <= e < 1e-14 for e in rows["float64"]["errors"].values())
    assert set(rows["bf16 -> bf16 (stochastic rounding)"]["expected"]) == {"1", "2", "4", "8", "16"}
    assert (tmp_path / "precision.png").read_bytes()[:4] == b"\x89PNG"


def test_a_bad_k_is_an_argparse_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["precision", "--k", "1,0"])
    assert "--k" in capsys.readouterr().err


def _study_like_the_digits_mlp() -> PrecisionStudy:
    """A study shaped as the digits MLP's (docs/precision.png): the bf16 rounding of the gradients
    themselves falls to 1.2e-4 at k=1024, level with float32's k·eps guide, where its label was."""
    ks = default_ks()
    rows = [PrecisionRow(name, gradients, buffer) for name, gradients, buffer in ROWS]
    for row in rows:
        eps = row.eps
        row.errors = {k: (0.25 if row.buffer_dtype == "bfloat16" else 0.4) * np.sqrt(k) * eps for k in ks}
    rounding = PrecisionRow(INPUT_ROUNDING, "bfloat16", "float64")
    rounding.errors = {k: 1.5e-3 * k ** -0.36 for k in ks}
    return PrecisionStudy(ks, [*rows, rounding], {"model": "mlp", "micro_batch": 8})


def test_the_eps_labels_and_the_legend_cover_no_line() -> None:
    figure = precision_figure(_study_like_the_digits_mlp())
    assert covered(figure) == []
    (ax,) = figure.axes
    labels = [t.get_text() for t in ax.texts]
    assert labels == [f"eps({dtype})\n= {eps:.1e}" for dtype, eps in (
        ("bfloat16", 2.0**-7), ("float32", float(np.finfo(np.float32).eps)), ("float64", 2.0**-52))]

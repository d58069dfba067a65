"""The float32 GEMM benchmark runs on the models' products and writes well-formed results: every
product of both models, the transposes the layers pass, a positive time for each library, totals
that are the products' sums (no time is compared)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks.float32_gemm import MODELS, _products, main
from minitorch_accum.backend.blas import native_gemm

pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module")


def test_the_products_are_the_layers_forward_input_and_weight_gradients() -> None:
    case, b = MODELS["char_transformer"]
    products = _products(case, b)
    assert len(products) == 3 * (4 * 2 + 1)  # four products a layer, two layers, the head; three each
    first = products[:3]
    assert first == [("forward", 1024, 64, 192, False, False), ("input gradient", 1024, 192, 64, False, True),
                     ("weight gradient", 64, 1024, 192, True, False)]


def test_a_run_writes_every_product_for_every_library(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--repeats", "1", "--out", str(tmp_path)]) == 0
    (written,) = tmp_path.glob("float32_gemm*-latest-cpu.json")  # named after a forced OpenBLAS kernel, if any
    data = json.loads(written.read_text())
    assert {row["model"] for row in data["rows"]} == set(MODELS)
    sides = set(data["rows"][0]["us"])
    assert {"ours", "numpy"} <= sides
    for row in data["rows"]:
        assert set(row["us"]) == sides and all(math.isfinite(v) and v > 0 for v in row["us"].values())
    for model, totals in data["totals_ms"].items():
        mine = [row for row in data["rows"] if row["model"] == model]
        assert totals["ours"] == pytest.approx(sum(row["us"]["ours"] for row in mine) / 1e3)
    said = capsys.readouterr().out
    assert "BLAS:" in said and "char_transformer: ours" in said

"""The float32 GEMM benchmark runs on the models' products and writes well-formed results: every
product of both models, the transposes the layers pass, a positive time for each library, rates and
totals computed from those times, the printout naming each library against ours (no time is
compared)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks import float32_gemm
from benchmarks.float32_gemm import CALLS_PER_SAMPLE, MODELS, _products, main
from minitorch_accum.backend.blas import native_gemm

pytestmark = pytest.mark.skipif(native_gemm() is None, reason="needs the native module")

try:
    import torch  # noqa: F401
    HAS_TORCH = True
except ImportError:
    HAS_TORCH = False


def test_the_products_are_the_layers_forward_input_and_weight_gradients() -> None:
    case, b = MODELS["char_transformer"]
    products = _products(case, b)
    assert len(products) == 3 * (4 * 2 + 1)  # four products a layer, two layers, the head; three each
    assert products[:3] == [("forward", 1024, 64, 192, False, False), ("input gradient", 1024, 192, 64, False, True),
                            ("weight gradient", 64, 1024, 192, True, False)]
    for kind, _, _, _, trans_a, trans_b in products:
        assert trans_a == (kind == "weight gradient") and trans_b == (kind == "input gradient")
    assert len(_products(*MODELS["nanogpt_cpu"])) == 3 * (4 * 4 + 1)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("float32_gemm")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENBLAS_CORETYPE", raising=False)  # the file's name says when a kernel was forced
        import io
        from contextlib import redirect_stdout

        printed = io.StringIO()
        with redirect_stdout(printed):
            assert main(["--repeats", "1", "--out", str(out)]) == 0
    data = json.loads((out / "float32_gemm-latest-cpu.json").read_text())
    return data, printed.getvalue()


def test_a_run_writes_every_product_for_every_library(run: tuple[dict, str]) -> None:
    data, _ = run
    assert data["benchmark"] == "float32_gemm"
    assert data["settings"] == {"repeats": 1, "calls_per_sample": CALLS_PER_SAMPLE, "threads": 1,
                                "models": {"char_transformer": 32, "nanogpt_cpu": 12}}
    assert data["machine"]["load_before"] is not None and data["machine"]["load_after"] is not None
    sides = {"ours", "numpy", "torch"} if HAS_TORCH else {"ours", "numpy"}
    for model, (case, b) in MODELS.items():
        rows = [row for row in data["rows"] if row["model"] == model]
        assert [(r["kind"], r["m"], r["k"], r["n"], r["trans_a"], r["trans_b"]) for r in rows] == _products(case, b)
        for row in rows:
            assert set(row["us"]) == sides == set(row["gflops"])
            for side, us in row["us"].items():
                assert math.isfinite(us) and 0.5 < us < 1e6  # a product of these shapes: 1 us to a second
                assert row["gflops"][side] == pytest.approx(2 * row["m"] * row["k"] * row["n"] / us / 1e3)
        for side in sides:
            assert data["totals_ms"][model][side] == pytest.approx(sum(row["us"][side] for row in rows) / 1e3)


def test_the_printout_names_the_blas_and_each_library_against_ours(run: tuple[dict, str]) -> None:
    data, printed = run
    lines = printed.splitlines()
    assert lines[0].startswith("BLAS: ") and "kernel" in lines[0]
    assert lines[1].startswith(f"float32 products of the models, 1 thread, median of 1 interleaved rounds of "
                               f"{CALLS_PER_SAMPLE} calls")
    for model, totals in data["totals_ms"].items():
        ours = totals["ours"]
        others = ", ".join(f"{side} {ms:.2f} ms ({ms / ours:.2f}x ours' time)" for side, ms in totals.items()
                           if side != "ours")
        assert f"  {model}: ours {ours:.2f} ms, {others}" in lines
    written = Path(lines[-1].removeprefix("wrote "))
    assert lines[-1].startswith("wrote ") and written.is_file() and written.name.startswith("float32_gemm-20")


def test_a_forced_openblas_kernel_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")  # read for the name only: OpenBLAS is loaded already
    monkeypatch.setattr(float32_gemm, "measure", lambda repeats: {"rows": [], "totals_ms": {}})
    assert main(["--repeats", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "float32_gemm-openblas-haswell-latest-cpu.json").is_file()


def test_without_the_native_gemm_it_says_so(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(float32_gemm, "native_gemm", lambda: None)
    assert main(["--repeats", "1"]) == 2
    assert capsys.readouterr().err == "float32_gemm: needs the native module and NumPy's bundled OpenBLAS\n"


def test_the_help_names_the_program_and_its_options(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    said = capsys.readouterr().out
    assert said.startswith("usage: python benchmarks/float32_gemm.py")
    assert float32_gemm.__doc__.split("\n\n")[0].split()[0:6] == said.split("\n\n")[1].split()[0:6]
    flat = " ".join(said.split())  # argparse wraps the help to the terminal's width
    assert "interleaved rounds (each 10 calls of each library)" in flat
    assert "directory of the result files (default: benchmarks/results)" in flat


def test_the_recorded_run_is_15_rounds_at_one_thread_into_the_tracked_results(monkeypatch: pytest.MonkeyPatch,
                                                                               tmp_path: Path) -> None:
    seen: dict[str, object] = {}
    monkeypatch.setattr(float32_gemm, "measure", lambda repeats: seen.update(repeats=repeats) or
                        {"rows": [], "totals_ms": {}})
    monkeypatch.setattr(float32_gemm.mta, "set_threads", lambda count: seen.update(threads=count))

    def where(out: object, recorded: bool) -> Path:
        seen.update(out=out, recorded=recorded)
        return tmp_path
    monkeypatch.setattr(float32_gemm, "results_dir", where)
    assert main([]) == 0
    assert seen == {"threads": 1, "repeats": 15, "out": None, "recorded": True}
    assert main(["--repeats", "3"]) == 0
    assert seen["repeats"] == 3 and seen["recorded"] is False

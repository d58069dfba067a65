"""Where results go (issue 11): only a run of the recorded configuration writes the tracked
``benchmarks/results/*-latest-*.json``; quick runs and runs with overrides go to the
git-ignored ``benchmarks/results/quick/`` unless ``--out`` names a directory."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.end_to_end import main as end_to_end_main
from benchmarks.harness import Benchmark, results
from benchmarks.harness import main as program_main
from benchmarks.kernels import main as kernels_main

TRACKED = Path(__file__).resolve().parents[2] / "benchmarks" / "results"

# each program's cheapest quick run: no --out, so it picks its own folder
QUICK_RUNS = {
    "kernels": (kernels_main, ["--quick", "--repeats", "1", "--no-plot"]),
    "end_to_end": (end_to_end_main, ["--quick", "--models", "digits_mlp", "--ks", "1,2", "--repeats", "1",
                                     "--no-torch", "--no-plot"]),
}


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.glob("*-latest-*.json"))}


@pytest.mark.parametrize("name", sorted(QUICK_RUNS))
def test_quick_run_leaves_the_tracked_results_untouched(name: str, capsys: pytest.CaptureFixture) -> None:
    program, argv = QUICK_RUNS[name]
    before = _snapshot(TRACKED)
    assert before, "the repository's recorded results are missing"
    assert program(argv) == 0
    assert _snapshot(TRACKED) == before
    wrote = capsys.readouterr().out.rsplit("wrote ", 1)[1].strip()
    assert Path(wrote).parent == TRACKED / "quick" and Path(wrote).name.startswith(f"{name}-")


@dataclass(frozen=True)
class _ToySettings:
    device: str = "cpu"
    repeats: int = 3
    quick: bool = False


def _toy(name: str = "toy") -> Benchmark[_ToySettings]:
    """The smallest benchmark a program can be: one figure, no plot."""

    def apply(settings: _ToySettings, args: argparse.Namespace) -> _ToySettings:
        return settings if args.repeats is None else replace(settings, repeats=args.repeats)

    def measure(settings: _ToySettings, log: Any) -> dict[str, Any]:
        return {"benchmark": name, "settings": {"device": settings.device, "repeats": settings.repeats}}

    return Benchmark(name=name, description="toy", quick_help="fewer repeats", full_settings=lambda d: _ToySettings(d),
                     quick_settings=lambda d: _ToySettings(d, repeats=1, quick=True), measure=measure,
                     format_table=lambda payload: f"repeats {payload['settings']['repeats']}",
                     apply_arguments=apply)


@pytest.mark.parametrize(("argv", "folder"), [
    ([], "tracked"),
    (["--quick"], "quick"),
    (["--repeats", "5"], "quick"),  # a full run with an override is not the recorded configuration
    (["--repeats", "3"], "tracked"),  # ... unless the override changes nothing
    (["--quick", "--out", "{out}"], "out"),
    (["--out", "{out}"], "out"),
])
def test_only_the_recorded_configuration_writes_the_tracked_folder(
        argv: list[str], folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tracked = tmp_path / "results"
    folders = {"tracked": tracked, "quick": tracked / "quick", "out": tmp_path / "out"}
    monkeypatch.setattr(results, "TRACKED_RESULTS", tracked)
    monkeypatch.setattr(results, "QUICK_RESULTS", tracked / "quick")
    assert program_main(_toy(), [a.format(out=folders["out"]) for a in argv]) == 0
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.json"))
    assert written and all(p.parent == folders[folder].relative_to(tmp_path) for p in written), written
    assert {p.name for p in written} >= {"toy-latest-cpu.json"}


def test_an_out_that_cannot_be_written_is_refused_before_measuring(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    def measure(settings: _ToySettings, log: Any) -> dict[str, Any]:
        raise AssertionError("measured before refusing --out")

    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    assert program_main(replace(_toy(), measure=measure), ["--quick", "--out", str(blocker / "results")]) == 2
    assert capsys.readouterr().err == (f"python benchmarks/toy.py: --out {blocker / 'results'} is inside {blocker}, "
                                       "which is a regular file, not a directory; choose another directory\n")
    assert blocker.read_text() == "mine"

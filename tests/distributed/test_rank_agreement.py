"""Ranks that disagree: every rank stops at the start with one line naming what differs and which
ranks hold which value, instead of training silently to other parameters or waiting for ever.
Ranks that compute with another BLAS kernel train on, rank 0 saying in one line that the run is
then not bit for bit (or every rank refuses, with --strict-numerics).

Under mpiexec with an MPMD launch (one command line per rank, as a careless or hostile launch
does), and without MPI for the pieces: the comparison, the run's description (settings, data, model).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum.backend.numerics import NumericsFingerprint, numerics_fingerprint
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.distributed import LocalCommunicator
from minitorch_accum.distributed.rank_agreement import (
    RanksComputeDifferentlyError,
    check_ranks_agree,
    compare_rank_numerics,
    describe_disagreement,
)
from minitorch_accum.testing import run_ranks
from minitorch_accum.train.run_agreement import data_description
from tests.distributed.launcher import run_programs

TRAIN = ["minitorch_accum.cli", "train", "--dataset", "digits", "--epochs", "1", "--progress", "none",
         "--micro-batch", "32"]


def _disagreement_lines(stderr: str) -> dict[str, str]:
    """{"[rank]": its error line} of the lines that say the ranks disagree."""
    lines = [line for line in stderr.splitlines() if "data-parallel ranks disagree" in line]
    return {line.split(" ", 1)[0]: line for line in lines}


@pytest.mark.mpi
@pytest.mark.parametrize(("second", "named"), [
    (["--accum", "4", "--seed", "1"], "seed: rank 0: 0; rank 1: 1"),  # trained silently to other parameters
    (["--accum", "2"], "grads_accumulation: rank 0: 4; rank 1: 2"),  # waited for ever in a collective
], ids=["seed", "accum"])
def test_ranks_started_with_other_settings_stop_at_once_naming_the_setting(tmp_path: Path, second: list[str],
                                                                            named: str, report: list[str]) -> None:
    started = time.monotonic()
    result = run_programs([[*TRAIN, "--accum", "4", "--out", str(tmp_path / "a")],
                           [*TRAIN, *second, "--out", str(tmp_path / "b")]], timeout=60)
    seconds = time.monotonic() - started
    lines = _disagreement_lines(result.stderr)
    assert result.returncode == 2, result.stderr[-3000:]
    assert sorted(lines) == ["[0]", "[1]"], result.stderr[-3000:]  # one line on every rank
    for line in lines.values():
        assert named in line and "maccum train: error:" in line, line
    assert not (tmp_path / "a" / "final.safetensors").exists()
    report.append(f"ranks launched with {' '.join(second)} on rank 1: both stopped in {seconds:.1f} s: "
                  f"{lines['[1]'].split(': ', 3)[-1][:110]}...")


def test_the_comparison_names_each_differing_entry_and_its_ranks() -> None:
    same = {"seed": 0, "model.parameters": [["w", [2, 3], "float64"], ["b", [3], "float64"]]}
    other = {"seed": 1, "model.parameters": [["w", [2, 3], "float64"], ["b", [3], "float32"]], "zero": True}
    phrases = describe_disagreement([same, same, other])
    assert phrases == ['seed: ranks 0, 1: 0; rank 2: 1', 'zero: ranks 0, 1: <absent>; rank 2: true',
                       'model.parameters (entry 1 of 2/2/2): ranks 0, 1: ["b", [3], "float64"]; '
                       'rank 2: ["b", [3], "float32"]']
    assert describe_disagreement([same, dict(same)]) == []


def test_one_process_agrees_with_itself_without_a_collective() -> None:
    comm = LocalCommunicator()
    check_ranks_agree(comm, {"seed": 0})
    assert comm.counts.calls == {}


def test_the_data_description_changes_with_one_item_and_with_the_order() -> None:
    x = np.arange(40, dtype=np.float64).reshape(20, 2)
    y = np.arange(20) % 3
    base = data_description(DataLoader(ArrayDataset(x, y), 4, seed=0))
    assert base == data_description(DataLoader(ArrayDataset(x.copy(), y.copy()), 4, seed=0))
    changed = x.copy()
    changed[7, 1] += 1e-12
    other_item = data_description(DataLoader(ArrayDataset(changed, y), 4, seed=0))
    assert other_item["data.content"] != base["data.content"]
    assert other_item["data.order (epoch 0)"] == base["data.order (epoch 0)"]
    other_order = data_description(DataLoader(ArrayDataset(x, y), 4, seed=1))
    assert other_order["data.order (epoch 0)"] != base["data.order (epoch 0)"]
    assert other_order["data.content"] == base["data.content"]


def test_every_learner_setting_but_the_per_rank_ones_is_compared(tmp_path: Path) -> None:
    from minitorch_accum import optim
    from minitorch_accum.train import LearnerBuilder
    from minitorch_accum.train.run_agreement import describe_run, settings_description
    from minitorch_accum.train.settings import SETTINGS
    from tests.distributed.rank_programs import classification_data, mlp

    learner = LearnerBuilder(tmp_path).grads_accumulation(3).build(mlp(), optim.AdamW(lr=0.01))
    loader = DataLoader(classification_data(), 4, seed=3)
    described = settings_description(learner.parts, loader, resume=True)
    for row in SETTINGS:
        if row.target == "learner":
            compared = any(name == row.name or name.startswith(f"{row.name}.") for name in described)
            assert compared != row.per_rank, row.name  # a new row is compared unless it says otherwise
    assert described["resume"] is True
    assert described["optimizer.type"] == "AdamW" and described["micro_batch"] == 4
    whole = describe_run(learner.parts, loader, resume=False)
    assert whole["model.parameters"][0] == ["module.0.weight", [6, 16], "float64"]
    assert json.loads(json.dumps(whole)) == whole  # what the ranks exchange is plain JSON


def _with_kernel(fingerprint: NumericsFingerprint, kernel: str) -> NumericsFingerprint:
    return dataclasses.replace(fingerprint, blas=tuple(dataclasses.replace(b, kernel=kernel) for b in fingerprint.blas))


def _numerics_on_each_rank(fingerprints: list[NumericsFingerprint], strict: bool) -> list[str | None]:
    """What compare_rank_numerics gives (or raises) on each of the simulated ranks."""
    def rank(comm: object) -> str | None:
        try:
            return compare_rank_numerics(comm, fingerprints[comm.rank], strict)
        except RanksComputeDifferentlyError as refused:
            return f"refused: {refused}"
    return run_ranks(len(fingerprints), rank)


def test_ranks_that_compute_alike_say_nothing_whatever_their_threads() -> None:
    here = numerics_fingerprint()
    fewer_threads = dataclasses.replace(here, native_threads=1, kernel_path="reference",
                                        blas=tuple(dataclasses.replace(b, threads=1) for b in here.blas))
    assert _numerics_on_each_rank([here, fewer_threads, here], strict=True) == [None, None, None]


def test_ranks_on_other_kernels_get_one_line_or_every_rank_refuses_when_strict() -> None:
    here = numerics_fingerprint()
    every = [_with_kernel(here, "Haswell"), _with_kernel(here, "SkylakeX"), _with_kernel(here, "Haswell")]
    said = _numerics_on_each_rank(every, strict=False)
    named = "BLAS: ranks 0, 2 compute with OpenBLAS Haswell, rank 1 with OpenBLAS SkylakeX"
    assert said[0] == said[1] == said[2] and said[0].startswith(f"numerics: {named}: the run equals one process "
                                                                "up to rounding, not bit for bit")
    refused = _numerics_on_each_rank(every, strict=True)
    assert all(r.startswith("refused: strict numerics (--strict-numerics): the 3 data-parallel ranks compute "
                            f"differently: {named}; bit for bit needs") for r in refused), refused


def _openblas_kernels() -> tuple[str, str]:
    """(the kernel OpenBLAS picks on this machine, another it can be forced to), or skip."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("OpenBLAS's x86 core types")
    env = {name: value for name, value in os.environ.items() if name != "OPENBLAS_CORETYPE"}
    code = "from minitorch_accum.backend.numerics import numerics_fingerprint as f; print(f().compared()['BLAS'])"
    picked = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                            check=True).stdout.strip()
    if not picked.startswith("OpenBLAS "):
        pytest.skip(f"NumPy here computes with {picked}, not OpenBLAS")
    return picked.removeprefix("OpenBLAS "), "Sandybridge" if picked == "OpenBLAS Haswell" else "Haswell"


@pytest.mark.mpi
@pytest.mark.parametrize("strict", [False, True], ids=["says-so", "strict-refuses"])
def test_ranks_on_other_blas_kernels_are_told(tmp_path: Path, strict: bool, report: list[str]) -> None:
    # the launch: OPENBLAS_CORETYPE on one rank alone; float64 parameters then differ by ~1e-16
    picked, forced = _openblas_kernels()
    options = ["--dtype", "float64", *(["--strict-numerics"] if strict else [])]
    result = run_programs([[*TRAIN, "--accum", "4", *options, "--out", str(tmp_path / "a")],
                           [*TRAIN, "--accum", "4", *options, "--out", str(tmp_path / "b")]], timeout=60,
                          environments=[{"OPENBLAS_CORETYPE": forced}, {"OPENBLAS_CORETYPE": None}])
    named = f"BLAS: rank 0 computes with OpenBLAS {forced}, rank 1 with OpenBLAS {picked}"
    if strict:
        lines = [line for line in result.stderr.splitlines() if "strict numerics" in line]
        assert result.returncode == 2, result.stderr[-3000:]
        assert sorted(line.split(" ", 1)[0] for line in lines) == ["[0]", "[1]"], result.stderr[-3000:]
        assert all(f"maccum train: error: strict numerics (--strict-numerics): the 2 data-parallel ranks compute "
                   f"differently: {named}; bit for bit needs" in line for line in lines), lines
        assert not (tmp_path / "a" / "final.safetensors").exists()
        return
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "numerics:" in line]
    assert result.returncode == 0, result.stderr[-3000:]
    # rank 0 alone says it, once, on stderr (--progress none shows nothing else), and the run goes on
    assert lines == [f"[0] numerics: {named}: the run equals one process up to rounding, not bit for bit (start "
                     "every rank with the same BLAS kernel, float32 GEMM and NumPy SIMD target; --strict-numerics "
                     "refuses)"], lines
    assert (tmp_path / "a" / "final.safetensors").exists()
    report.append(f"ranks on OpenBLAS {forced} and {picked}: {lines[0][:100]}...")


@pytest.mark.mpi
def test_float32_ranks_on_other_blas_kernels_hear_no_alarm_and_get_the_same_bits(tmp_path: Path,
                                                                                  report: list[str]) -> None:
    load_file = pytest.importorskip("safetensors.numpy").load_file
    # float32 products are the native GEMM's, one order on every kernel: no BLAS rounds them, so the
    # kernel is no difference (strictness included) and the run is the one of ranks on one kernel
    picked, forced = _openblas_kernels()
    finals = []
    for name, forced_on_rank_0 in (("mixed", forced), ("alike", None)):
        out = tmp_path / name
        result = run_programs([[*TRAIN, "--accum", "4", "--strict-numerics", "--out", str(out / "a")],
                               [*TRAIN, "--accum", "4", "--strict-numerics", "--out", str(out / "b")]], timeout=60,
                              environments=[{"OPENBLAS_CORETYPE": forced_on_rank_0}, {"OPENBLAS_CORETYPE": None}])
        assert result.returncode == 0, result.stderr[-3000:]
        assert "numerics" not in result.stdout + result.stderr, result.stderr[-3000:]
        finals.append(load_file(out / "a" / "final.safetensors"))
    assert finals[0].keys() == finals[1].keys() and len(finals[0]) >= 2
    for name, value in finals[0].items():
        assert value.dtype == np.float32 and value.tobytes() == finals[1][name].tobytes(), name
    report.append(f"float32 ranks on OpenBLAS {forced} and {picked}: no alarm, the same final bytes as ranks alike")

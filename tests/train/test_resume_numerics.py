"""A resume on a machine that computes otherwise than the checkpoint's (another BLAS kernel) says so
in one line, or refuses with strict_numerics; the same machine, or a checkpoint of a version that
did not record it, says nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from minitorch_accum import optim
from minitorch_accum.backend.blas import FIXED_ORDER
from minitorch_accum.backend.numerics import NumericsFingerprint, numerics_fingerprint
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.train import SettingsMismatchError, TrainingInterrupted
from minitorch_accum.train.checkpoint.record import record_checksum
from tests.train.stopping_models import StopAt, send
from tests.train.test_learner import dataset, model
from tests.train.test_resume_guards import _builder, _interrupted_run


def _elsewhere(monkeypatch: pytest.MonkeyPatch, **also: str) -> tuple[str, str]:
    """Make this process's fingerprint another BLAS kernel's (and ``also`` its other fields); (the
    checkpoint's BLAS, this 'machine's')."""
    here = numerics_fingerprint()
    kernel = "Sandybridge" if any(library.kernel == "Haswell" for library in here.blas) else "Haswell"
    other = dataclasses.replace(here, blas=tuple(dataclasses.replace(b, kernel=kernel) for b in here.blas), **also)
    monkeypatch.setattr("minitorch_accum.train.resume.numerics_fingerprint", lambda: other)
    return here.compared()["BLAS"], other.compared()["BLAS"]


def _resume(directory: Path, strict: bool = False) -> object:
    learner = _builder(directory).strict_numerics(strict).build(model(), optim.AdamW(lr=0.01))
    learner.fit(DataLoader(dataset(), 10), resume=True)
    return learner


def test_a_resume_on_the_same_machine_says_nothing_of_numerics(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture) -> None:
    _interrupted_run(tmp_path, at=3)
    capsys.readouterr()
    _resume(tmp_path, strict=True)
    said = capsys.readouterr()
    assert "resumed from step" in said.out and "numerics" not in said.out + said.err


def test_a_resume_on_a_machine_with_another_blas_kernel_says_so_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupted_run(tmp_path, at=3)
    capsys.readouterr()
    saved, now = _elsewhere(monkeypatch)
    learner = _resume(tmp_path)
    lines = [line for line in capsys.readouterr().out.splitlines() if "numerics" in line]
    assert lines == [f"numerics: BLAS: this checkpoint was written with {saved}, this machine computes with {now}: "
                     "the resumed run equals an uninterrupted one up to rounding, not bit for bit "
                     "(--strict-numerics refuses)"]
    assert learner.step == 10  # the run went on to its end
    # the checkpoints it wrote record what it computed with
    latest = sorted((tmp_path / "checkpoints").glob("step*"))[-1]
    record = json.loads((latest / "state.json").read_text())["state"]["numerics"]
    assert NumericsFingerprint.from_dict(record).compared()["BLAS"] == now


def test_strict_numerics_refuses_that_resume_before_loading_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupted_run(tmp_path, at=3)
    saved, now = _elsewhere(monkeypatch)
    learner = _builder(tmp_path).strict_numerics().build(model(), optim.AdamW(lr=0.01))
    before = {name: p.numpy().copy() for name, p in learner.model.named_parameters()}
    with pytest.raises(SettingsMismatchError, match=r"^resume: strict numerics \(--strict-numerics\): BLAS: this "
                       rf"checkpoint was written with {saved}, this machine computes with {now} \(checkpoint in "):
        learner.fit(DataLoader(dataset(), 10), resume=True)
    assert learner.step == 0
    for name, p in learner.model.named_parameters():
        assert (p.numpy() == before[name]).all(), name


def test_a_checkpoint_that_recorded_no_numerics_resumes_silently_even_when_strict(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupted_run(tmp_path, at=3)
    for state_file in (tmp_path / "checkpoints").glob("step*/state.json"):  # as an earlier version wrote them
        record = json.loads(state_file.read_text())
        del record["state"]["numerics"], record["state"]["window_origin"]  # both new in this version
        body = {key: value for key, value in record.items() if key != "record_sha256"}
        state_file.write_text(json.dumps({**body, "record_sha256": record_checksum(body)}))
    capsys.readouterr()
    _elsewhere(monkeypatch)
    assert _resume(tmp_path, strict=True).step == 10
    assert "numerics" not in capsys.readouterr().out


def _float32_data() -> ArrayDataset:
    x, y = dataset().arrays
    return ArrayDataset(x.astype(np.float32), y)


def _interrupted_float32_run(directory: Path) -> None:
    learner = _builder(directory).build(StopAt(model("float32"), 3, send(2)), optim.AdamW(lr=0.01))
    with pytest.raises(TrainingInterrupted):
        learner.fit(DataLoader(_float32_data(), 10))


def _resume_float32(directory: Path, strict: bool) -> object:
    learner = _builder(directory).strict_numerics(strict).build(model("float32"), optim.AdamW(lr=0.01))
    learner.fit(DataLoader(_float32_data(), 10), resume=True)
    return learner


def test_a_float32_run_resumes_on_another_blas_kernel_silently_even_when_strict(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # its products are the native GEMM's on both sides: no BLAS rounds any of them
    _interrupted_float32_run(tmp_path)
    capsys.readouterr()
    _elsewhere(monkeypatch)
    assert _resume_float32(tmp_path, strict=True).step == 10
    said = capsys.readouterr()
    assert "resumed from step" in said.out and "numerics" not in said.out + said.err


def test_a_float32_run_resumed_where_the_blas_rounds_float32_is_told_both(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupted_float32_run(tmp_path)
    capsys.readouterr()
    saved, now = _elsewhere(monkeypatch, float32_gemm="BLAS (MTA_GEMM=scipy)")
    _resume_float32(tmp_path, strict=False)
    lines = [line for line in capsys.readouterr().out.splitlines() if "numerics" in line]
    assert lines == [f"numerics: BLAS: this checkpoint was written with {saved}, this machine computes with {now}; "
                     f"float32 GEMM: this checkpoint was written with {FIXED_ORDER}, this machine computes with "
                     "BLAS (MTA_GEMM=scipy): the resumed run equals an uninterrupted one up to rounding, not bit for "
                     "bit (--strict-numerics refuses)"]

"""Checkpoints written by the code of 2026-12-03 (before the redesign of issue 16) still load,
and a run resumed from them ends on the parameters that the uninterrupted run of that day wrote
(fixtures/make_checkpoints_2026_12_03.py says how they were made).

Bit for bit until issue 19: cross entropy now runs on a fused kernel (float64 inside, its own
exp and log), whose loss gradient differs from the NumPy formula of that day by rounding, so
the 2 to 4 optimizer steps after the checkpoint end within 1.5e-8 of that day's parameters
(a float32 ulp of weights ~0.05; measured on both runs), not on them: within 1e-7 here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file

FIXTURES = Path(__file__).parent / "fixtures" / "checkpoints_2026_12_03"
CLI_ARGS = ["train", "--dataset", "digits", "--accum", "3", "--micro-batch", "16", "--epochs", "1",
            "--checkpoint-every", "4", "--progress", "none"]


def _copy(name: str, tmp_path: Path) -> Path:
    run = tmp_path / name
    shutil.copytree(FIXTURES / name, run)
    (run / "expected.safetensors").unlink()
    return run


def _assert_same_parameters(written: Path, expected: Path) -> None:
    got, want = load_file(written), load_file(expected)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].dtype == want[name].dtype
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-7, err_msg=name)


def test_cli_checkpoint_of_2026_12_03_resumes_to_that_days_parameters(tmp_path: Path) -> None:
    run = _copy("cli", tmp_path)
    result = subprocess.run([sys.executable, "-m", "minitorch_accum.cli", *CLI_ARGS, "--out", str(run), "--resume"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "trained 30 optimizer steps" in result.stdout
    _assert_same_parameters(run / "final.safetensors", FIXTURES / "cli" / "expected.safetensors")


def test_cli_checkpoint_of_2026_12_03_resumes_given_only_its_directory(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    from minitorch_accum.cli import main

    run = _copy("cli", tmp_path)  # its record predates the settings table: k as the window of all ranks
    assert main(["train", "--resume", "--out", str(run), "--progress", "none"]) == 0
    assert "trained 30 optimizer steps" in capsys.readouterr().out
    _assert_same_parameters(run / "final.safetensors", FIXTURES / "cli" / "expected.safetensors")


def test_mid_window_checkpoint_of_2026_12_03_resumes_to_that_days_parameters(tmp_path: Path) -> None:
    import minitorch_accum as mta
    from minitorch_accum.data import DataLoader, load_digits
    from minitorch_accum.nn import Linear, ReLU, Sequential
    from minitorch_accum.optim import AdamW
    from minitorch_accum.train import LearnerBuilder

    run = _copy("window", tmp_path)
    mta.manual_seed(123)  # the checkpoint's RNG state and parameters replace whatever this draws
    train, valid = load_digits().split(0.8, seed=0)
    model = Sequential(Linear(64, 32), ReLU(), Linear(32, 10))
    learner = (LearnerBuilder(run).num_epochs(1).grads_accumulation(3).seed(0).progress("none")
               .with_file_checkpointer(every_micro_batches=5, keep=100).build(model, AdamW(lr=3e-3)))
    _, history = learner.fit(DataLoader(train, 16, shuffle=True, seed=0), DataLoader(valid, 512), resume=True)
    assert history.steps[-1]["step"] == 30
    _assert_same_parameters(run / "final.safetensors", FIXTURES / "window" / "expected.safetensors")


@pytest.mark.parametrize("name", ["cli", "window"])
def test_checkpoint_of_2026_12_03_verifies(name: str) -> None:
    from minitorch_accum.train import FileCheckpointer

    arrays, state = FileCheckpointer(FIXTURES / name / "checkpoints").load(require=("model", "optimizer"))
    assert set(arrays) == {"model", "optimizer", "accumulator"}
    assert state["step"] in (26, 28)


# ------------------------------------------------------------ records of earlier versions, in process
# The first version of format 2 wrote no "settings" (only "config": reduction, fusion, epochs), no
# "world_size" (one process), no "validated" (a checkpoint was taken after validation) and no
# "rng_ranks"; none wrote "window_origin" or "numerics" before. Such a record is made here from one
# of today's, re-sealed as that version would have written it (all of those keys dropped together: a record
# that lacks only one of them was not written by any version, and is refused).

FIRST_LAYOUT_LACKS = ("settings", "world_size", "validated", "rng_ranks", "window_origin", "numerics")

def _data(n: int = 100, seed: int = 0) -> Any:
    from minitorch_accum.data import ArrayDataset, DataLoader

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6))
    return DataLoader(ArrayDataset(x, (x[:, 0] + x[:, 1] > 0).astype(np.int64)), 10, shuffle=seed == 0, seed=1)


def _model() -> Any:
    import minitorch_accum as mta
    from minitorch_accum.nn import Linear, Sequential, Tanh

    mta.manual_seed(0)
    return Sequential(Linear(6, 8, dtype="float64"), Tanh(), Linear(8, 3, dtype="float64"))


def _builder(directory: Path, epochs: int, **options: Any) -> Any:
    from minitorch_accum.train import LearnerBuilder

    # 10 micro-batches of 10 per epoch, k = 4: windows of 4, 4 and 2
    return (LearnerBuilder(directory).num_epochs(epochs).grads_accumulation(4).accum_dtype("float64")
            .progress("none").with_file_checkpointer(**(options or {"every_steps": 3})))


def _fit(directory: Path, epochs: int, resume: bool = False, valid: bool = False, builder: Any = None,
         **options: Any) -> tuple[dict[str, np.ndarray], Any]:
    from minitorch_accum.optim import AdamW

    learner = (builder or _builder(directory, epochs, **options)).build(_model(), AdamW(lr=0.01))
    trained, history = learner.fit(_data(), _data(30, seed=4) if valid else None, resume=resume)
    return {name: p.numpy().copy() for name, p in trained.named_parameters()}, history


def _as_an_earlier_version_wrote(run: Path, *dropped: str) -> dict[str, Any]:
    """Drop ``dropped`` from the latest checkpoint's state, and the checkpoint cadence from its config (no
    earlier version recorded it), and seal its record again; its state."""
    from minitorch_accum.train.checkpoint.record import record_checksum

    checkpoints = run / "checkpoints"
    path = checkpoints / (checkpoints / "latest").read_text().strip() / "state.json"
    record = json.loads(path.read_text())
    for key in dropped:
        del record["state"][key]
    del record["state"]["config"]["checkpoint_every_steps"]
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    path.write_text(json.dumps({**body, "record_sha256": record_checksum(body)}))
    return record["state"]


def _assert_equal(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_record_without_settings_resumes_and_refuses_another_reduction_or_fusion(tmp_path: Path) -> None:
    from minitorch_accum.train import SettingsMismatchError

    reference, _ = _fit(tmp_path / "whole", 2)
    _fit(tmp_path / "run", 1)
    state = _as_an_earlier_version_wrote(tmp_path / "run", *FIRST_LAYOUT_LACKS)
    assert state["config"] == {"reduction": "items", "fusion": "gemm", "num_epochs": 1}
    for change, named in ((lambda b: b.fusion("leaf"), "fusion 'gemm' -> 'leaf'"),
                          (lambda b: b.reduction("mean"), "reduction 'items' -> 'mean'")):
        with pytest.raises(SettingsMismatchError, match=f"was written with other settings: {named};"):
            _fit(tmp_path / "run", 2, resume=True, builder=change(_builder(tmp_path / "run", 2)))
    resumed, history = _fit(tmp_path / "run", 2, resume=True)  # the epochs may change
    assert [r["step"] for r in history.steps] == list(range(1, 7))
    _assert_equal(resumed, reference)


def test_a_mid_window_record_without_world_size_is_of_one_process(tmp_path: Path) -> None:
    import minitorch_accum as mta

    reference, _ = _fit(tmp_path / "whole", 2, every_micro_batches=3)
    _fit(tmp_path / "run", 1, every_micro_batches=3)
    state = _as_an_earlier_version_wrote(tmp_path / "run", *FIRST_LAYOUT_LACKS)
    assert state["next_batch"] == 9 and state["accumulator"]["micro_step"] == 1  # inside the last window
    from minitorch_accum.optim import AdamW

    learner = _builder(tmp_path / "run", 2, every_micro_batches=3).build(_model(), AdamW(lr=0.01))
    mta.manual_seed(999)  # the checkpoint's generator state replaces this one
    trained, _ = learner.fit(_data(), resume=True)
    _assert_equal({name: p.numpy() for name, p in trained.named_parameters()}, reference)
    assert mta.get_rng_state() == state["rng"]  # nothing in the run draws from it after the resume


def test_a_record_without_validated_was_taken_after_its_validation(tmp_path: Path) -> None:
    _fit(tmp_path, 1, valid=True)  # the checkpoint of step 3 waits for epoch 0's validation
    state = _as_an_earlier_version_wrote(tmp_path, *FIRST_LAYOUT_LACKS)
    assert state["step"] == 3
    _, history = _fit(tmp_path, 2, resume=True, valid=True)
    assert [(r["epoch"], r["step"]) for r in history.valid] == [(0, 3), (1, 6)]  # epoch 0 not validated again


def test_a_checkpoint_still_records_what_an_earlier_version_reads(tmp_path: Path) -> None:
    from minitorch_accum.optim import SGD
    from minitorch_accum.train import LearnerBuilder

    (LearnerBuilder(tmp_path).num_epochs(1).grads_accumulation(5).reduction("mean").fusion("leaf").progress("none")
     .with_file_checkpointer(every_steps=1).build(_model(), SGD(0.1)).fit(_data()))
    state = _as_an_earlier_version_wrote(tmp_path)
    assert state["config"] == {"reduction": "mean", "fusion": "leaf", "num_epochs": 1}
    assert state["world_size"] == 1 and state["rng_ranks"] is None  # one process: its stream is "rng"

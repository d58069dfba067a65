"""A damaged checkpoint is reported on stderr whatever the progress mode, set aside under
``<name>.damaged-<n>`` and never removed: not by the saves that follow, not by retention,
not by ``--overwrite``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.train import FileCheckpointer, LearnerBuilder, check_run_directory
from minitorch_accum.train.checkpoint import DamagedCheckpointWarning


def _data() -> DataLoader:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 6))
    return DataLoader(ArrayDataset(x, (x[:, 0] > 0).astype(np.int64)), 10)


def _model() -> nn.Module:
    rng = np.random.default_rng(0)
    return nn.Sequential(nn.Linear(6, 8, rng=rng), nn.Tanh(), nn.Linear(8, 2, rng=rng))


def _builder(directory: Path, epochs: int = 1) -> LearnerBuilder:
    return (LearnerBuilder(directory).num_epochs(epochs).grads_accumulation(2).progress("none")
            .with_file_checkpointer(every_steps=1, keep=2))


def _corrupt(checkpoint: Path) -> bytes:
    """Flip one byte of its weights, keeping the size (so only the checksum can tell)."""
    weights = checkpoint / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-5] ^= 0xFF
    weights.write_bytes(bytes(data))
    return bytes(data)


def test_a_corrupt_latest_under_progress_none_is_reported_on_stderr_and_kept(
        tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    _builder(tmp_path).build(_model(), optim.SGD(0.1)).fit(_data())  # 3 steps, a checkpoint each
    (tmp_path / "final.safetensors").unlink()  # as if stopped before its end (a complete run has nothing to resume)
    checkpoints = tmp_path / "checkpoints"
    latest = checkpoints / (checkpoints / "latest").read_text().strip()
    damaged_bytes = _corrupt(latest)
    capfd.readouterr()
    _, history = _builder(tmp_path).build(_model(), optim.SGD(0.1)).fit(_data(), resume=True)
    err = capfd.readouterr().err
    kept = checkpoints / f"{latest.name}.damaged-1"
    assert "model.safetensors does not match its checksum" in err
    assert f"(kept as {kept.name})" in err and "using the newest intact checkpoint" in err
    assert [record["step"] for record in history.steps] == [1, 2, 3]  # step 3 again, from step 2
    # the step-3 save went on under the damaged one's name; the damaged one is untouched beside it
    assert (kept / "model.safetensors").read_bytes() == damaged_bytes
    assert (checkpoints / latest.name).is_dir()
    checkpointer = FileCheckpointer(checkpoints)
    checkpointer.load(checkpoints / latest.name)  # the new one is intact
    # retention keeps 2 intact checkpoints, the damaged one neither counted nor removed
    _builder(tmp_path, epochs=2).build(_model(), optim.SGD(0.1)).fit(_data(), resume=True)
    assert len(checkpointer.checkpoints()) == 2 and (kept / "model.safetensors").read_bytes() == damaged_bytes
    # a new run over this one removes the run, not the damaged checkpoint
    check_run_directory(tmp_path, resume=False, overwrite=True)
    assert checkpointer.checkpoints() == [] and kept.is_dir()


def test_a_save_never_removes_a_damaged_checkpoint_it_supersedes(tmp_path: Path) -> None:
    checkpointer = FileCheckpointer(tmp_path, keep=2)
    first = checkpointer.save("A", {"model": {"w": np.arange(4.0)}}, {"step": 1})
    damaged_bytes = _corrupt_file(first / "model.safetensors")
    with pytest.warns(DamagedCheckpointWarning, match=r"does not match its checksum; kept as .*A\.damaged-1"):
        again = checkpointer.save("A", {"model": {"w": np.arange(4.0) + 1}}, {"step": 1})
    assert (tmp_path / "A.damaged-1" / "model.safetensors").read_bytes() == damaged_bytes
    assert checkpointer.load()[1] == {"step": 1} and again == tmp_path / "A"
    assert [path.name for path in checkpointer.checkpoints()] == ["A"]


def test_loading_with_set_aside_renames_each_damaged_checkpoint_and_says_where(tmp_path: Path) -> None:
    checkpointer = FileCheckpointer(tmp_path, keep=3)
    for step in (1, 2, 3):
        checkpointer.save(f"S{step}", {"model": {"w": np.full(3, float(step))}}, {"step": step})
    _corrupt_file(tmp_path / "S3" / "model.safetensors")
    _corrupt_file(tmp_path / "S2" / "model.safetensors")
    (tmp_path / "S3.damaged-1").mkdir()  # a name taken: the next number is used
    plain = checkpointer.load_checkpoint()  # without set_aside, loading changes nothing
    assert plain.state == {"step": 1} and (tmp_path / "S3").is_dir() and (tmp_path / "S2").is_dir()
    loaded = checkpointer.load_checkpoint(set_aside_damaged=True)
    assert loaded.state == {"step": 1}
    assert [skip.kept_as for skip in loaded.skipped] == [tmp_path / "S3.damaged-2", tmp_path / "S2.damaged-1"]
    assert "(kept as S3.damaged-2)" in loaded.message
    assert (tmp_path / "S3.damaged-2" / "model.safetensors").exists()


def _corrupt_file(path: Path) -> bytes:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    return bytes(data)

"""A resume checks what a checkpoint holds, not only its checksums: a record re-signed by hand
with a key missing, arrays of the wrong dtype, a dropped optimizer moment, NaN weights, a
position beyond the data or a window whose sums disagree are refused with one line naming what
is wrong and the file, before anything is loaded."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from minitorch_accum import nn, optim
from minitorch_accum.data import ArrayDataset, DataLoader
from minitorch_accum.train import CheckpointError, LearnerBuilder
from minitorch_accum.train.checkpoint.record import group_entry, record_checksum

STATE, MODEL, OPTIMIZER = "state.json", "model.safetensors", "optimizer.safetensors"


def _data() -> DataLoader:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(48, 6)).astype(np.float32)
    return DataLoader(ArrayDataset(x, (x[:, 0] > 0).astype(np.int64)), 8)


def _model(seed: int = 0) -> nn.Module:
    rng = np.random.default_rng(seed)
    return nn.Sequential(nn.Linear(6, 8, rng=rng), nn.Tanh(), nn.Linear(8, 2, rng=rng))


def _builder(directory: Path) -> LearnerBuilder:
    # 6 micro-batches, k = 4: a checkpoint every 3 micro-batches lands mid-window (arena saved)
    return (LearnerBuilder(directory).num_epochs(2).grads_accumulation(4).progress("none")
            .with_file_checkpointer(every_micro_batches=3))


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("run")
    _builder(directory).build(_model(), optim.AdamW(lr=0.01)).fit(_data())
    return directory


def _latest(run: Path) -> Path:
    return run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip()


def _resign(checkpoint: Path, state: Callable[[dict], Any] | None = None, group: str | None = None,
            arrays: Callable[[dict], Any] | None = None) -> None:
    """Change the state or one group's arrays and seal the record again, as a hand edit would."""
    record = json.loads((checkpoint / STATE).read_text())
    if state is not None:
        state(record["state"])
    if group is not None:
        values = load_file(checkpoint / f"{group}.safetensors")
        arrays(values)
        save_file(values, checkpoint / f"{group}.safetensors")
        record["groups"][group] = group_entry(group, (checkpoint / f"{group}.safetensors").read_bytes())
    body = {key: value for key, value in record.items() if key != "record_sha256"}
    (checkpoint / STATE).write_text(json.dumps({**body, "record_sha256": record_checksum(body)}))


def _drop(key: str) -> Callable[[dict], Any]:
    return lambda values: values.pop(key)


def _set(key: str, value: Any) -> Callable[[dict], Any]:
    return lambda values: values.__setitem__(key, value)


def _with_nan(key: str) -> Callable[[dict], Any]:
    def change(values: dict) -> None:
        values[key] = values[key].copy()
        values[key].flat[3] = np.nan
    return change


CASES = {
    "no rng": (dict(state=_drop("rng")), STATE, "lacks 'rng'"),
    "no window": (dict(state=_drop("window")), STATE, "lacks 'window'"),
    "no optimizer": (dict(state=_drop("optimizer")), STATE, "lacks 'optimizer'"),
    "no step count": (dict(state=lambda s: s["optimizer"].pop("step_count")), STATE,
                      r"lacks optimizer\['step_count'\]"),
    "epoch as text": (dict(state=_set("epoch", "1")), STATE, "'epoch' is str '1', not an int"),
    "next batch beyond the data": (dict(state=_set("next_batch", 99)), STATE,
                                   "'next_batch' is 99, beyond the 6 micro-batches"),
    "window of 49 items": (dict(state=lambda s: s["window"].__setitem__("items", s["window"]["items"] + 1)), STATE,
                           r"the window records \d+ items in 3 micro-batches, the accumulator \d+ items in 3"),
    "bad rng": (dict(state=lambda s: s["rng"].__setitem__("state", {"state": "x"})), STATE,
                "'rng' is not a PCG64 state"),
    "int32 weights": (dict(group="model", arrays=lambda v: v.__setitem__("module.0.weight",
                                                                          v["module.0.weight"].astype(np.int32))),
                      MODEL, "'module.0.weight' is int32, expected float32"),
    "a weight of another shape": (dict(group="model", arrays=_set("module.2.bias", np.zeros(3, np.float32))),
                                  MODEL, r"'module.2.bias' has shape \(3,\), expected \(2,\)"),
    "NaN weights": (dict(group="model", arrays=_with_nan("module.0.weight")), MODEL,
                    r"'module.0.weight' holds 1 non-finite value\(s\)"),
    "a dropped moment": (dict(group="optimizer", arrays=_drop("module.0.weight/exp_avg_sq")), OPTIMIZER,
                         "the state of 'module.0.weight' lacks exp_avg_sq"),
    "NaN moment": (dict(group="optimizer", arrays=_with_nan("module.2.weight/exp_avg")), OPTIMIZER,
                   "'module.2.weight/exp_avg' holds 1 non-finite value"),
    "a moment of another parameter": (dict(group="optimizer", arrays=_set("module.9.weight/exp_avg",
                                                                          np.zeros(2, np.float32))),
                                      OPTIMIZER, "names the parameter 'module.9.weight'"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_re_signed_checkpoint_that_does_not_fit_is_refused_naming_what_and_where(
        case: str, saved_run: Path, tmp_path: Path) -> None:
    change, file, message = CASES[case]
    run = tmp_path / "run"
    shutil.copytree(saved_run, run)
    checkpoint = _latest(run)
    _resign(checkpoint, **change)
    before = {path.name: path.read_bytes() for path in checkpoint.iterdir()}
    model = _model(seed=7)
    initial = {name: p.numpy().copy() for name, p in model.named_parameters()}
    learner = _builder(run).build(model, optim.AdamW(lr=0.01))
    with pytest.raises(CheckpointError) as refused:
        learner.fit(_data(), resume=True)
    text = str(refused.value)
    assert "\n" not in text and f"checkpoint {checkpoint}: {file}: " in text, text
    assert re.search(message, text), text
    # nothing was loaded, nothing in the checkpoint changed or moved
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.numpy(), initial[name], err_msg=name)
    assert learner.step == 0 and learner.optimizer.step_count == 0
    assert {path.name: path.read_bytes() for path in checkpoint.iterdir()} == before


def test_an_untouched_checkpoint_still_resumes(saved_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(saved_run, run)
    _, history = _builder(run).build(_model(seed=7), optim.AdamW(lr=0.01)).fit(_data(), resume=True)
    assert [record["step"] for record in history.steps] == [1, 2, 3, 4]

"""A resume checks what a checkpoint holds, not only its checksums: a record re-signed by hand
with a key missing or one no version writes, arrays of the wrong dtype, a dropped optimizer
moment, NaN weights, a position beyond the data or off its windows, a step count, a window or
items that disagree with the position are refused with one line naming what is wrong and the
file, before anything is loaded."""

from __future__ import annotations

import copy
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
from minitorch_accum.train import CheckpointError, FileCheckpointer, LearnerBuilder
from minitorch_accum.train.checkpoint.record import group_entry, record_checksum
from minitorch_accum.train.checkpoint_contents import check_checkpoint_contents, check_checkpoint_record
from minitorch_accum.train.window_record import WindowTotals

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
    """A run stopped after its checkpoint of step 2 (mid-window, epoch 1): the whole run, less its final file."""
    directory = tmp_path_factory.mktemp("run")
    _builder(directory).build(_model(), optim.AdamW(lr=0.01)).fit(_data())
    (directory / "final.safetensors").unlink()  # else the run is complete: nothing to resume
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


# ---------------------------------------------------------------------------------------------
# Field by field: a valid record with ONE field corrupted, checked directly (no resume), so each
# refusal's whole line is asserted: the file, the field and where it is, and the bound it broke.

HERE = Path("ckpt")  # the checkpoint a message names; the checks read nothing from it


def _refused(file: str, text: str, checkpoint: object = HERE) -> str:
    return "^" + re.escape(f"checkpoint {checkpoint}: {file}: {text}; nothing was loaded") + "$"


@pytest.fixture(scope="module")
def saved(saved_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, dict]]:
    """(arrays, state) of the latest checkpoint (mid-window, step 2) of runs of each store kind."""
    runs = {"adamw": saved_run}
    for kind, change in (("fp16", lambda b: b.mixed_precision("fp16")), ("compensated", lambda b: b.compensated()),
                         ("containers", lambda b: b.fusion("none"))):
        runs[kind] = tmp_path_factory.mktemp(kind)
        change(_builder(runs[kind])).build(_model(), optim.AdamW(lr=0.01)).fit(_data())
    loaded = {kind: FileCheckpointer(run / "checkpoints").load_checkpoint() for kind, run in runs.items()}
    return {kind: (checkpoint.arrays, checkpoint.state) for kind, checkpoint in loaded.items()}


def _copy(saved: dict[str, tuple[dict, dict]], kind: str = "adamw") -> tuple[dict, dict]:
    arrays, state = saved[kind]
    return {group: dict(values) for group, values in arrays.items()}, copy.deepcopy(state)


def _at_a_window_boundary(state: dict) -> None:
    state.update(next_batch=0)
    state["accumulator"].update(micro_step=0, items=0)
    state["window"].update(micro=0, items=0)


def _at(epoch: int, next_batch: int, step: int, micro: int = 0, items: int | None = None) -> Callable[[dict], Any]:
    """The position, steps and window set together (8 items a micro-batch), as a run would record them."""
    def change(state: dict) -> None:
        state.update(epoch=epoch, next_batch=next_batch, step=step)
        state["accumulator"].update(micro_step=micro, items=8 * micro if items is None else items)
        state["window"].update(micro=micro, items=8 * micro if items is None else items)
    return change


def _world(size: int, ranks: Callable[[dict], Any] | None) -> Callable[[dict], Any]:
    def change(state: dict) -> None:
        state["world_size"] = size
        state["settings"]["world_size"] = size  # the record of k per rank says on how many ranks
        state["rng_ranks"] = None if ranks is None else ranks(state["rng"])
    return change


def _in(key: str, change: Callable[[dict], Any]) -> Callable[[dict], Any]:
    return lambda state: change(state[key])


def _put(key: str, value: Any) -> Callable[[dict], Any]:
    return lambda table: table.__setitem__(key, copy.deepcopy(value))


WINDOW_KEYS = sorted(WindowTotals().state())

RECORD_REFUSALS = {
    "no epoch": (_drop("epoch"), "lacks 'epoch'"),
    "epoch null": (_put("epoch", None), "'epoch' is NoneType None, not an int"),
    "epoch below 0": (_put("epoch", -1), "'epoch' is -1, below 0"),
    "no next_batch": (_drop("next_batch"), "lacks 'next_batch'"),
    "next_batch below 0": (_put("next_batch", -1), "'next_batch' is -1, below 0"),
    "no step": (_drop("step"), "lacks 'step'"),
    "step below 0": (_put("step", -1), "'step' is -1, below 0"),
    "world_size as text": (_put("world_size", "2"), "'world_size' is str '2', not an int"),
    "world_size null": (_put("world_size", None), "'world_size' is NoneType None, not an int"),
    "world_size 0": (_put("world_size", 0), "'world_size' is 0, below 1"),
    "world_size below 0": (_put("world_size", -1), "'world_size' is -1, below 1"),
    "validated as text": (_put("validated", "yes"), "'validated' is str 'yes', not a bool"),
    "rng not an object": (_put("rng", [1]), "'rng' is list [1], not an object"),
    "rng without its generator": (_in("rng", _drop("bit_generator")), "lacks rng['bit_generator']"),
    "rng of an unknown generator": (_in("rng", _put("bit_generator", "Nope")),
                                    "'rng' names the bit generator 'Nope', which NumPy does not have"),
    "rng of a Generator, no bit generator": (_in("rng", _put("bit_generator", "Generator")),
                                             "'rng' names the bit generator 'Generator', which NumPy does not have"),
    "rng of a function": (_in("rng", _put("bit_generator", "seed")),
                          "'rng' names the bit generator 'seed', which NumPy does not have"),
    "rng_ranks as text": (_put("rng_ranks", "x"), "'rng_ranks' is str 'x', not a list"),
    "2 ranks, no rng_ranks": (_world(2, None), "'rng_ranks' must hold the RNG state of each of the 2 ranks"),
    "2 ranks, 1 rng": (_world(2, lambda rng: [rng]), "'rng_ranks' must hold the RNG state of each of the 2 ranks"),
    "3 ranks, 2 rngs": (_world(3, lambda rng: [rng, rng]),
                        "'rng_ranks' must hold the RNG state of each of the 3 ranks"),
    "rank 1's rng unknown": (_world(2, lambda rng: [rng, {**rng, "bit_generator": "Nope"}]),
                             "'rng_ranks[1]' names the bit generator 'Nope', which NumPy does not have"),
    "rank 1's rng a number": (_world(2, lambda rng: [rng, 5]), "rng_ranks[1] is not an object"),
    "rank 0's rng without its generator": (_world(2, lambda rng: [{"state": rng["state"]}, rng]),
                                           "lacks rng_ranks[0]['bit_generator']"),
    "settings a list": (_put("settings", []), "'settings' is list [], not an object"),
    "settings of another world size": (_in("settings", _put("world_size", 2)),
                                       "the settings' world_size is 2, the state's 1"),
    "neither settings nor config": (lambda s: (s.pop("settings"), s.pop("config")), "lacks 'config'"),
    "no config": (_drop("config"), "lacks 'config'"),
    "no settings": (_drop("settings"), "lacks 'settings' (a record that holds 'world_size' was written with it)"),
    "no world_size": (_drop("world_size"),
                      "lacks 'world_size' (a record that holds 'validated' was written with it)"),
    "no validated": (_drop("validated"), "lacks 'validated' (a record that holds 'world_size' was written with it)"),
    "no rng_ranks, but a window origin": (_drop("rng_ranks"),
                                          "lacks 'rng_ranks' (a record that holds 'world_size' was written with it)"),
    "a key no version writes": (_put("next_batches", 4),
                                "the state holds 'next_batches', which no checkpoint of this version writes"),
    "an optimizer key no version writes": (_in("optimizer", _put("lr", 1.0)),
                                           "'optimizer' holds 'lr', which no checkpoint of this version writes"),
    "an accumulator key no version writes": (_in("accumulator", _put("k", 4)),
                                             "'accumulator' holds 'k', which no checkpoint of this version writes"),
    "a config key no version writes": (_in("config", _put("seed", 0)),
                                       "'config' holds 'seed', which no checkpoint of this version writes"),
    "config without num_epochs": (_in("config", _drop("num_epochs")), "lacks config['num_epochs']"),
    "config of 0 epochs": (_in("config", _put("num_epochs", 0)), "'num_epochs' is 0, below 1"),
    "config of a negative cadence": (_in("config", _put("checkpoint_every_steps", -1)),
                                     "'checkpoint_every_steps' is -1, below 0"),
    "config of a cadence as text": (_in("config", _put("checkpoint_every_steps", "5")),
                                    "'checkpoint_every_steps' is str '5', not an int"),
    "config's reduction not the settings'": (_in("config", _put("reduction", "mean")),
                                             "the config's reduction is 'mean', the settings' 'items'"),
    "the accumulator's fusion not the config's": (_in("accumulator", _put("fusion", "leaf")),
                                                  "the accumulator's fusion is 'leaf', the config's 'gemm'"),
    "a window origin after the position": (_put("window_origin", {"epoch": 1, "next_batch": 4, "step": 2}),
                                           "'window_origin' is epoch 1, micro-batch 4, step 2: after the checkpoint's "
                                           "own position (epoch 1, micro-batch 0, step 2)"),
    "a window origin of a later step": (_put("window_origin", {"epoch": 0, "next_batch": 0, "step": 3}),
                                        "'window_origin' is epoch 0, micro-batch 0, step 3: after the checkpoint's "
                                        "own position (epoch 1, micro-batch 0, step 2)"),
    "a window origin without its step": (_put("window_origin", {"epoch": 0, "next_batch": 0}),
                                         "lacks window_origin['step']"),
    "a window origin of an unknown key": (_put("window_origin", {"epoch": 0, "next_batch": 0, "step": 0, "k": 1}),
                                          "'window_origin' holds 'k', which no checkpoint of this version writes"),
    "a whole window held open": (lambda s: (_at(1, 4, 2, micro=4)(s)),
                                 "the window holds 4 micro-batches, a whole window of 4 x 1 rank(s): it would have "
                                 "closed"),
    "2 ranks mid-window": (_world(2, lambda rng: [rng, rng]),
                           "the window holds 3 micro-batches, but 2 ranks save only at a window's end"),
    "scheduler a number": (_put("scheduler", 5), "'scheduler' is int 5, not an object"),
    "numerics a list": (_put("numerics", []), "'numerics' is list [], not an object"),
    "numerics without its BLAS": (_in("numerics", _drop("blas")), "'numerics': the numerics fingerprint lacks 'blas'"),
    "numerics with a BLAS kernel a number": (_in("numerics", lambda n: n["blas"][0].__setitem__("kernel", 7)),
                                             "'numerics': the numerics fingerprint's 'blas[0].kernel' is 7, not str"),
    "no accumulator": (_drop("accumulator"), "lacks 'accumulator'"),
    "step_count below 0": (_in("optimizer", _put("step_count", -1)), "'step_count' is -1, below 0"),
    "no skipped_steps": (_in("optimizer", _drop("skipped_steps")), "lacks optimizer['skipped_steps']"),
    "skipped_steps below 0": (_in("optimizer", _put("skipped_steps", -1)), "'skipped_steps' is -1, below 0"),
    "no hyperparameters": (_in("optimizer", _drop("hyperparameters")), "lacks optimizer['hyperparameters']"),
    "no optimizer scalars": (_in("optimizer", _drop("scalars")), "lacks optimizer['scalars']"),
    "a parameter's scalars a number": (_in("optimizer", _in("scalars", _put("module.0.bias", 5))),
                                       "the optimizer scalars of 'module.0.bias' are not an object"),
    "no accumulation steps": (_in("accumulator", _drop("steps")), "lacks accumulator['steps']"),
    "accumulation steps 0": (_in("accumulator", _put("steps", 0)), "'steps' is 0, below 1"),
    "no reduction": (_in("accumulator", _drop("reduction")), "lacks accumulator['reduction']"),
    "no fusion": (_in("accumulator", _drop("fusion")), "lacks accumulator['fusion']"),
    "no micro_step": (_in("accumulator", _drop("micro_step")), "lacks accumulator['micro_step']"),
    "micro_step below 0": (_in("accumulator", _put("micro_step", -1)), "'micro_step' is -1, below 0"),
    "no accumulator items": (_in("accumulator", _drop("items")), "lacks accumulator['items']"),
    "accumulator items below 0": (_in("accumulator", _put("items", -1)), "'items' is -1, below 0"),
    "no window_index": (_in("accumulator", _drop("window_index")), "lacks accumulator['window_index']"),
    "window_index below 0": (_in("accumulator", _put("window_index", -1)), "'window_index' is -1, below 0"),
    "no skipped_windows": (_in("accumulator", _drop("skipped_windows")), "lacks accumulator['skipped_windows']"),
    "a skipped window as text": (_in("accumulator", _put("skipped_windows", [1, "2"])),
                                 "'skipped_windows' must list window numbers (ints)"),
    "no store": (_in("accumulator", _drop("store")), "lacks accumulator['store']"),
    "loss_scaler a number": (_in("accumulator", _put("loss_scaler", 5)), "'loss_scaler' is int 5, not an object"),
    "a window beyond its position": (_put("next_batch", 2),
                                     "the window holds 3 micro-batches, but its position is micro-batch 2"),
    "a window of an unknown key": (_in("window", _put("extra", 1)),
                                   f"'window' holds the keys {sorted([*WINDOW_KEYS, 'extra'])}, "
                                   f"expected {WINDOW_KEYS}"),
    "a window without peak": (_in("window", _drop("peak")),
                              f"'window' holds the keys {[k for k in WINDOW_KEYS if k != 'peak']}, "
                              f"expected {WINDOW_KEYS}"),
    "window loss as text": (_in("window", _put("loss_sum", "1.5")), "'loss_sum' is str '1.5', not a number"),
    "window correct as text": (_in("window", _put("correct", "20")), "'correct' is str '20', not an int"),
    "window array_peak a float": (_in("window", _put("array_peak", 1.5)), "'array_peak' is float 1.5, not an int"),
    "window items disagree": (_in("window", _put("items", 25)),
                              "the window records 25 items in 3 micro-batches, the accumulator 24 items in 3"),
}


@pytest.mark.parametrize("case", sorted(RECORD_REFUSALS))
def test_a_record_with_one_field_wrong_is_refused_naming_the_field_and_where_it_is(
        case: str, saved: dict[str, tuple[dict, dict]]) -> None:
    change, text = RECORD_REFUSALS[case]
    _, state = _copy(saved)
    change(state)
    with pytest.raises(CheckpointError, match=_refused(STATE, text)):
        check_checkpoint_record(state, HERE)


def _as_written_by(layout: int) -> Callable[[dict], Any]:
    """The state in the layout of an earlier version: 0 the first (no settings, world_size, validated,
    rng_ranks), 1 without rng_ranks, 2 without window_origin and numerics."""
    later = (("world_size", "validated", "settings"), ("rng_ranks",), ("window_origin", "numerics"))
    return lambda state: [state.pop(key) for added in later[layout:] for key in added]


RECORD_ACCEPTED = {
    "as saved": lambda s: None,
    "at the start of an epoch (next_batch 0)": _at_a_window_boundary,
    "at the very start (epoch 0, step 0)": lambda s: (_at_a_window_boundary(s), s.update(epoch=0, step=0)),
    "a window of one micro-batch (steps 1)": lambda s: (_at_a_window_boundary(s), s["accumulator"].update(steps=1)),
    "of the first layout (no settings, world_size, validated, rng_ranks)": _as_written_by(0),
    "of the layout without rng_ranks": _as_written_by(1),
    "of the layout without window_origin and numerics": _as_written_by(2),
    "of 2 ranks with an rng each": lambda s: (_at_a_window_boundary(s), _world(2, lambda rng: [rng, rng])(s)),
    "with a loss scaler's state": _in("accumulator", _put("loss_scaler", {"scale": 1024.0, "clean_windows": 3})),
    "with skipped windows": _in("accumulator", _put("skipped_windows", [1, 3])),
    "without correct or array_peak counted": _in("window", lambda w: w.update(correct=None, array_peak=None)),
    "with the window exactly at its position": lambda s: s.update(next_batch=3),
}


@pytest.mark.parametrize("case", sorted(RECORD_ACCEPTED))
def test_a_record_within_every_bound_is_accepted(case: str, saved: dict[str, tuple[dict, dict]]) -> None:
    _, state = _copy(saved)
    RECORD_ACCEPTED[case](state)
    check_checkpoint_record(state, HERE)


def test_a_record_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(CheckpointError, match=_refused(STATE, "the state is not an object")):
        check_checkpoint_record([], HERE)


def test_a_refusal_on_a_rank_that_did_not_read_the_checkpoint_says_which_one_it_is(
        saved: dict[str, tuple[dict, dict]]) -> None:
    _, state = _copy(saved)
    state["step"] = -3
    with pytest.raises(CheckpointError, match=_refused(STATE, "'step' is -3, below 0", "the checkpoint rank 0 read")):
        check_checkpoint_record(state, None)


class _KeepsHistory(optim.lr_scheduler.LRScheduler):
    """A scheduler of the user's whose state holds a list it restores in place."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[float] = []

    def lr_at(self, step: int) -> float:
        return 0.01

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.history[:] = state["history"]


class _SaysForMomentumOnly(optim.SGD):
    """An SGD that declares the arrays it keeps only for groups with momentum (None: not said)."""

    def state_array_slots(self, settings: dict[str, Any]) -> tuple[str, ...] | None:
        return ("momentum_buffer",) if settings["momentum"] else None


def _learner(directory: Path, kind: str = "adamw", optimizer: optim.Optimizer | None = None,
             change: Callable[[LearnerBuilder], LearnerBuilder] = lambda b: b,
             model: nn.Module | None = None) -> Any:
    builder = change(_builder(directory))
    builder = {"fp16": lambda b: b.mixed_precision("fp16"), "compensated": lambda b: b.compensated(),
               "containers": lambda b: b.fusion("none")}.get(kind, lambda b: b)(builder)
    return builder.build(model or _model(seed=7), optimizer or optim.AdamW(lr=0.01))


def _check(learner: Any, arrays: dict, state: dict) -> None:
    check_checkpoint_record(state, HERE)
    check_checkpoint_contents(learner.parts, arrays, state, _data(), HERE)


def _arrays(group: str, change: Callable[[dict], Any]) -> Callable[[dict, dict], Any]:
    return lambda arrays, state: change(arrays[group])


def _state(change: Callable[[dict], Any]) -> Callable[[dict, dict], Any]:
    return lambda arrays, state: change(state)


def _zeros(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)


def _without_group(group: str) -> Callable[[dict, dict], Any]:
    return lambda arrays, state: arrays.pop(group)


ACCUMULATOR = "accumulator.safetensors"
CONTENTS_REFUSALS = {
    "next_batch beyond the data": ("adamw", _state(_put("next_batch", 7)), STATE,
                                   "'next_batch' is 7, beyond the 6 micro-batches of an epoch of this data"),
    "next_batch moved to the next window": ("adamw", _state(_at(1, 4, 2)), STATE,
                                            "'step' is 2, but micro-batch 4 of epoch 1 comes after 3 optimizer steps "
                                            "(windows of 4 micro-batches over epochs of 6 micro-batches)"),
    "step one more than the windows before": ("adamw", _state(_at(1, 3, 3, micro=3)), STATE,
                                              "'step' is 3, but micro-batch 0 of epoch 1 comes after 2 optimizer "
                                              "steps (windows of 4 micro-batches over epochs of 6 micro-batches)"),
    "next_batch moved inside its window": ("adamw", _state(_at(1, 4, 2, micro=3)), STATE,
                                           "'next_batch' is 4 with 3 micro-batch(es) of an open window, which puts a "
                                           "window's start at micro-batch 1 of epoch 1: not a window boundary "
                                           "(windows of 4 micro-batches)"),
    "next_batch at no window's end": ("adamw", _state(_at(1, 3, 2)), STATE,
                                      "'next_batch' is 3, which puts a window's start at micro-batch 3 of epoch 1: "
                                      "not a window boundary (windows of 4 micro-batches)"),
    "an open window beyond its end": ("adamw", _state(_at(1, 6, 3, micro=2)), STATE,
                                      "'next_batch' is 6 with 2 micro-batch(es) of an open window: beyond the "
                                      "window that starts at micro-batch 4 (windows of 4 micro-batches)"),
    "the window's items not its micro-batches'": ("adamw", _state(_at(1, 3, 2, micro=3, items=23)), STATE,
                                                  "the window records 23 items, but its micro-batches 0-2 of epoch 1 "
                                                  "hold 24"),
    "a validation pending mid-epoch": ("adamw", _state(lambda s: (_at(1, 4, 3)(s), s.update(validated=False))),
                                       STATE, "'validated' is false at micro-batch 4 of epoch 1: only a checkpoint "
                                              "at an epoch's end waits for its validation"),
    "k of the accumulator not the settings'": ("adamw", _state(lambda s: (_at(1, 0, 2)(s),
                                                                         s["accumulator"].update(steps=2))), STATE,
                                               "the accumulator's window is 2 micro-batches x 1 rank(s), the "
                                               "settings' 4 in epoch 1"),
    "windows off their origin": ("adamw", _state(lambda s: (_at(1, 4, 3)(s), s.update(
        window_origin={"epoch": 1, "next_batch": 1, "step": 2}))), STATE,
        "'next_batch' is 4, which puts a window's start at micro-batch 4 of epoch 1: not a window boundary "
        "(windows of 4 micro-batches from micro-batch 1)"),
    "hyperparameters this optimizer refuses": ("adamw", _state(_in("optimizer", _in("hyperparameters",
                                                                                    _put("lr", -1)))), STATE,
                                               "'optimizer' does not fit this run (ValueError: lr must be a "
                                               "number >= 0, got -1)"),
    "a loss scaler's state without its clean windows": (
        "fp16", _state(_in("accumulator", _put("loss_scaler", {"scale": 8.0}))), STATE,
        "'loss_scaler' does not fit this run (KeyError: 'clean_windows')"),
    "no model arrays": ("adamw", _without_group("model"), MODEL,
                        "lacks 'module.0.bias', 'module.0.weight', 'module.2.bias', 'module.2.weight'"),
    "a weight missing": ("adamw", _arrays("model", _drop("module.0.weight")), MODEL, "lacks 'module.0.weight'"),
    "a weight the model does not have": ("adamw", _arrays("model", _put("extra", _zeros(2))), MODEL,
                                         "holds 'extra', which Classifier does not have"),
    "two weights the model does not have": ("adamw", _arrays("model", lambda v: v.update(a=_zeros(1), b=_zeros(1))),
                                            MODEL, "holds 'a', 'b', which Classifier does not have"),
    "a weight missing and one unknown": ("adamw", _arrays("model", lambda v: (v.pop("module.2.bias"),
                                                                              v.update(extra=_zeros(2)))),
                                         MODEL, "lacks 'module.2.bias'; holds 'extra', which Classifier does not "
                                                "have"),
    "no optimizer arrays": ("adamw", _without_group("optimizer"), OPTIMIZER,
                            "the state of 'module.0.weight' lacks exp_avg, exp_avg_sq"),
    "a moment under a longer name": ("adamw", _arrays("optimizer", _put("module.0.weight/exp_avg/x", _zeros(6, 8))),
                                     OPTIMIZER, "'module.0.weight/exp_avg/x' names the parameter "
                                                "'module.0.weight/exp_avg', which Classifier does not have"),
    "a slot AdamW does not keep": ("adamw", _arrays("optimizer", _put("module.2.bias/momentum_buffer", _zeros(2))),
                                   OPTIMIZER, "the state of 'module.2.bias' holds momentum_buffer, which AdamW does "
                                              "not keep"),
    "two slots AdamW does not keep": ("adamw", _arrays("optimizer", lambda v: v.update({
        "module.2.bias/momentum_buffer": _zeros(2), "module.2.bias/a": _zeros(2)})), OPTIMIZER,
        "the state of 'module.2.bias' holds a, momentum_buffer, which AdamW does not keep"),
    "scalars of a parameter the model does not have": (
        "adamw", _state(_in("optimizer", _in("scalars", _put("module.9.weight", {})))), STATE,
        "the optimizer state names the parameter 'module.9.weight', which the model does not have"),
    "moments of a parameter without scalars, one dropped": (
        "adamw", lambda arrays, state: (state["optimizer"]["scalars"].pop("module.0.weight"),
                                        arrays["optimizer"].pop("module.0.weight/exp_avg_sq")),
        OPTIMIZER, "the state of 'module.0.weight' lacks exp_avg_sq"),
    "a 16-bit parameter's master copy dropped": ("fp16", _arrays("optimizer", _drop("module.2.bias/master")),
                                                 OPTIMIZER, "the state of 'module.2.bias' lacks master"),
    "a 16-bit parameter's moment of its own dtype": (
        "fp16", _arrays("optimizer", lambda v: v.__setitem__("module.2.bias/exp_avg",
                                                             v["module.2.bias/exp_avg"].astype(np.float16))),
        OPTIMIZER, "'module.2.bias/exp_avg' is float16, expected float32"),
    "no accumulator arrays mid-window": ("adamw", _without_group("accumulator"), ACCUMULATOR,
                                         "holds [], expected ['arena/float32']"),
    "an arena of another size": ("adamw", _arrays("accumulator", _put("arena/float32", _zeros(95))), ACCUMULATOR,
                                 "'arena/float32' has shape (95,), expected (96,)"),
    "an arena of another dtype": ("adamw", _arrays("accumulator", _put("arena/float32", np.zeros(96))), ACCUMULATOR,
                                  "'arena/float32' is float64, expected float32"),
    "a compensated run without its compensation": (
        "compensated", _arrays("accumulator", _drop("compensation/float32")), ACCUMULATOR,
        "holds ['arena/float32'], expected ['arena/float32', 'compensation/float32']"),
    "a compensation a plain run does not keep": (
        "adamw", _arrays("accumulator", _put("compensation/float32", _zeros(96))), ACCUMULATOR,
        "holds ['arena/float32', 'compensation/float32'], expected ['arena/float32']"),
    "a gradient of a parameter the model does not have": (
        "containers", _arrays("accumulator", _put("grad/module.9.weight", _zeros(2))), ACCUMULATOR,
        "holds 'grad/module.9.weight', no parameter's gradient"),
    "gradients under names that are none": (
        "containers", _arrays("accumulator", lambda v: v.update({"other/module.0.weight": _zeros(6, 8),
                                                                 "grad/x/module.0.weight": _zeros(6, 8)})),
        ACCUMULATOR, "holds 'other/module.0.weight', 'grad/x/module.0.weight', no parameter's gradient"),
    "a gradient of another shape": ("containers", _arrays("accumulator", _put("grad/module.2.bias", _zeros(3))),
                                    ACCUMULATOR, "'grad/module.2.bias' has shape (3,), expected (2,)"),
}


@pytest.mark.parametrize("case", sorted(CONTENTS_REFUSALS))
def test_contents_that_do_not_fit_the_learner_are_refused_naming_the_file_and_what(
        case: str, saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    kind, change, file, text = CONTENTS_REFUSALS[case]
    arrays, state = _copy(saved, kind)
    change(arrays, state)
    with pytest.raises(CheckpointError, match=_refused(file, text)):
        _check(_learner(tmp_path, kind), arrays, state)


CONTENTS_ACCEPTED = {
    "as saved": ("adamw", lambda arrays, state: None),
    "mixed precision (fp16) as saved": ("fp16", lambda arrays, state: None),
    "compensated as saved": ("compensated", lambda arrays, state: None),
    "summed containers as saved": ("containers", lambda arrays, state: None),
    "at the end of an epoch (next_batch 6)": ("adamw", _state(_at(1, 6, 4))),
    "at the end of an epoch, before its validation": ("adamw", _state(lambda s: (_at(0, 6, 2)(s),
                                                                                s.update(validated=False)))),
    "at a window boundary": ("adamw", _state(_at(1, 4, 3))),
    "one micro-batch into the last window of an epoch": ("adamw", _state(_at(0, 5, 1, micro=1))),
    "of the first layout (no settings: no position check)": ("adamw", _state(lambda s: (_as_written_by(0)(s),
                                                                                       s.update(step=7)))),
    "windows from a resume's origin (k changed there)": (
        "adamw", _state(lambda s: (_at(1, 5, 3)(s), s.update(window_origin={"epoch": 1, "next_batch": 1,
                                                                             "step": 2})))),
    "a scheduler's state for a run without one": ("adamw", _state(_put("scheduler", {"steps_taken": 2}))),
    "a loss scaler's state for a run without one": (
        "adamw", _state(_in("accumulator", _put("loss_scaler", {"scale": 8.0, "clean_windows": 0})))),
    "a mixed-precision run's scaler never saved": ("fp16", _state(_in("accumulator", _put("loss_scaler", None)))),
    # a window may hold a non-finite gradient: its step is then skipped, so it is resumed as it was
    "a window holding a NaN gradient": ("adamw", _arrays("accumulator", _with_nan("arena/float32"))),
    "a compensated window holding an inf": (
        "compensated", _arrays("accumulator", lambda v: v.__setitem__("compensation/float32",
                                                                      np.full(96, np.inf, np.float32)))),
    "summed containers holding a NaN gradient": ("containers", _arrays("accumulator",
                                                                       _with_nan("grad/module.0.weight"))),
    "between windows, no accumulator arrays": (
        "adamw", lambda arrays, state: (_at_a_window_boundary(state), arrays.pop("accumulator"))),
    "moments of a parameter without scalars": (
        "adamw", _state(_in("optimizer", _in("scalars", _drop("module.0.weight"))))),
}


@pytest.mark.parametrize("case", sorted(CONTENTS_ACCEPTED))
def test_contents_that_fit_the_learner_are_accepted(case: str, saved: dict[str, tuple[dict, dict]],
                                                    tmp_path: Path) -> None:
    kind, change = CONTENTS_ACCEPTED[case]
    arrays, state = _copy(saved, kind)
    change(arrays, state)
    _check(_learner(tmp_path, kind), arrays, state)


def test_a_scheduler_state_the_run_s_scheduler_cannot_take_is_refused(
        saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    arrays, state = _copy(saved)
    learner = _learner(tmp_path, change=lambda b: b.lr_scheduler(optim.lr_scheduler.StepLR(0.01, 2)))
    _check(learner, arrays, state)  # saved without a scheduler: this run's starts afresh
    state["scheduler"] = {"steps": 2}
    with pytest.raises(CheckpointError, match=_refused(STATE, "'scheduler' does not fit this run "
                                                              "(KeyError: 'steps_taken')")):
        _check(learner, arrays, state)


def test_a_refused_checkpoint_leaves_the_run_s_scheduler_as_it_was(
        saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    scheduler = _KeepsHistory()
    scheduler.history[:] = [0.5]
    arrays, state = _copy(saved)
    state["scheduler"] = {"steps_taken": 9, "history": [0.1, 0.2]}  # fits; the model arrays do not
    arrays["model"]["module.0.weight"] = np.full((6, 8), np.nan, np.float32)
    with pytest.raises(CheckpointError, match=_refused(MODEL, "'module.0.weight' holds 48 non-finite value(s) "
                                                              "(NaN or inf)")):
        _check(_learner(tmp_path, change=lambda b: b.lr_scheduler(scheduler)), arrays, state)
    assert scheduler.history == [0.5] and scheduler.steps_taken == 0


def test_hyperparameters_are_not_checked_when_the_run_keeps_its_own(
        saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    arrays, state = _copy(saved)
    state["optimizer"]["hyperparameters"]["lr"] = -1
    _check(_learner(tmp_path, change=lambda b: b.allow_config_change()), arrays, state)


def test_moments_are_required_only_of_the_parameters_an_optimizer_group_updates(
        saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    model = _model(seed=7)
    last = [p for name, p in model.named_parameters() if name.startswith("2.")]
    optimizer = optim.AdamW([{"params": last}], lr=0.01)
    arrays, state = _copy(saved)
    state["optimizer"]["hyperparameters"] = optimizer.hyperparameters()
    learner = _learner(tmp_path, optimizer=optimizer, model=model)
    arrays["optimizer"] = {k: v for k, v in arrays["optimizer"].items() if not k.startswith("module.0.weight/")}
    _check(learner, arrays, state)  # module.0.* is frozen: whatever it holds is not asked for
    arrays["optimizer"].pop("module.2.bias/exp_avg")  # after the frozen ones in the state's order
    with pytest.raises(CheckpointError, match=_refused(OPTIMIZER, "the state of 'module.2.bias' lacks exp_avg")):
        _check(learner, arrays, state)


def test_moments_are_required_of_every_group_whose_arrays_the_optimizer_declares(
        saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    model = _model(seed=7)
    params = {f"module.{name}": p for name, p in model.named_parameters()}  # the learner's names
    optimizer = _SaysForMomentumOnly([{"params": [params["module.0.weight"], params["module.0.bias"]]},
                                      {"params": [params["module.2.weight"], params["module.2.bias"]],
                                       "momentum": 0.9}], lr=0.1)
    arrays, state = _copy(saved)
    state["optimizer"]["hyperparameters"] = optimizer.hyperparameters()
    state["optimizer"]["scalars"] = {name: {} for name in params}  # module.0.* first
    arrays["optimizer"] = {"module.2.weight/momentum_buffer": _zeros(8, 2), "module.2.bias/momentum_buffer": _zeros(2)}
    learner = _learner(tmp_path, optimizer=optimizer, model=model)
    _check(learner, arrays, state)
    arrays["optimizer"].pop("module.2.bias/momentum_buffer")
    with pytest.raises(CheckpointError, match=_refused(OPTIMIZER, "the state of 'module.2.bias' lacks "
                                                                  "momentum_buffer")):
        _check(learner, arrays, state)


def test_nan_in_bfloat16_weights_is_refused(saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    arrays, state = _copy(saved)
    learner = _learner(tmp_path, change=lambda b: b.mixed_precision("bf16"))
    weights = {name: p.numpy().copy() for name, p in learner.step_model.named_parameters()}
    assert weights["module.0.weight"].dtype.name == "bfloat16"
    arrays["model"] = weights
    arrays["optimizer"] = {}
    state["optimizer"]["scalars"] = {}
    _check(learner, arrays, state)
    weights["module.0.weight"].flat[5] = np.nan
    with pytest.raises(CheckpointError, match=_refused(MODEL, "'module.0.weight' holds 1 non-finite value(s) "
                                                              "(NaN or inf)")):
        _check(learner, arrays, state)


class _WithPhase(nn.Module):
    """A model with a complex buffer (a phase it is saved with, not trained)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 2, rng=np.random.default_rng(0))
        self.phase = nn.Buffer(np.ones(3, np.complex64))

    def forward(self, x: Any) -> Any:
        return self.linear(x)


def test_an_infinite_imaginary_part_of_a_complex_buffer_is_refused(
        saved: dict[str, tuple[dict, dict]], tmp_path: Path) -> None:
    arrays, state = _copy(saved)
    _at_a_window_boundary(state)
    state["optimizer"]["scalars"] = {}
    learner = _learner(tmp_path, model=_WithPhase())
    model = learner.step_model
    weights = {name: np.array(p.numpy()) for name, p in model.named_parameters()}
    weights.update({name: np.array(buffer.value) for name, buffer in model.named_buffers()})
    arrays = {"model": weights, "optimizer": {}, "accumulator": {}}
    _check(learner, arrays, state)
    weights["module.phase"][1] = complex(1.0, np.inf)
    with pytest.raises(CheckpointError, match=_refused(MODEL, "'module.phase' holds 1 non-finite value(s) "
                                                              "(NaN or inf)")):
        _check(learner, arrays, state)

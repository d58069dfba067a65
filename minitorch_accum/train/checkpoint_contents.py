"""What a Learner's checkpoint must hold before a resume loads any of it.

The checkpoint package verifies bytes (every file against its SHA-256, the record against its
own); a record can still be re-signed by hand, or written by another model. So a resume first
checks the contents against the learner it is about to fill: every state key with its type (the
numerics fingerprint field by field), the model's arrays by name, shape and dtype and finite, each
optimizer slot the optimizer keeps (by name, shape and dtype, finite; none dropped), the
accumulator's arrays and the window's
sums (the items of the micro-batches it holds), the RNG, scheduler and loss-scaler states, and
positions inside the data. The first thing wrong raises one CheckpointError naming it and the
file it is in; nothing has been loaded then, so the learner, its model and the checkpoint
directory are as they were.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from minitorch_accum.backend.numerics import NumericsFingerprint
from minitorch_accum.data import DataLoader
from minitorch_accum.train.checkpoint import CheckpointError
from minitorch_accum.train.window_record import WindowTotals

if TYPE_CHECKING:
    from minitorch_accum.train.learner import Learner

__all__ = ["check_checkpoint_contents", "check_checkpoint_record"]

_STATE = "state.json"
_INT, _NUMBER, _BOOL, _DICT, _LIST, _STR = "an int", "a number", "a bool", "an object", "a list", "a string"
_OF_KIND = {_INT: lambda v: type(v) is int, _NUMBER: lambda v: type(v) in (int, float),
            _BOOL: lambda v: type(v) is bool, _DICT: lambda v: type(v) is dict, _LIST: lambda v: type(v) is list,
            _STR: lambda v: type(v) is str}
_SIXTEEN_BIT = ("float16", "bfloat16")


class _ContentError(Exception):
    """One thing wrong, and the checkpoint file it is in."""

    def __init__(self, file: str, text: str) -> None:
        super().__init__(text)
        self.file = file


def check_checkpoint_record(state: Any, checkpoint: Path | None) -> None:
    """CheckpointError naming the first key of a learner checkpoint's state that is missing or
    of the wrong type (or out of range), before anything reads it."""
    with _reported(checkpoint):
        _check_record(state)


def check_checkpoint_contents(learner: Learner, arrays: dict[str, dict[str, np.ndarray]], state: dict[str, Any],
                              loader: DataLoader, checkpoint: Path | None) -> None:
    """CheckpointError naming the first thing in ``arrays``/``state`` (a checked record) that does not
    fit ``learner`` and ``loader``."""
    with _reported(checkpoint):
        _check_fit(learner, state, loader)
        _check_model(learner, arrays.get("model", {}))
        _check_optimizer(learner, arrays.get("optimizer", {}), state["optimizer"])
        _check_accumulator(learner, arrays.get("accumulator", {}), state["accumulator"])


@contextlib.contextmanager
def _reported(checkpoint: Path | None) -> Iterator[None]:
    try:
        yield
    except _ContentError as problem:
        where = checkpoint if checkpoint is not None else "the checkpoint rank 0 read"
        raise CheckpointError(f"checkpoint {where}: {problem.file}: {problem}; nothing was loaded") from None


def _need(table: Any, key: str, kind: str, where: str, file: str = _STATE, optional: bool = False) -> Any:
    if type(table) is not dict:
        raise _ContentError(file, f"{where} is not an object")
    if key not in table:
        if optional:
            return None
        raise _ContentError(file, f"lacks {where}[{key!r}]" if where != "the state" else f"lacks {key!r}")
    value = table[key]
    if optional and value is None:
        return None
    if not _OF_KIND[kind](value):
        raise _ContentError(file, f"{key!r} is {type(value).__name__} {value!r:.60}, not {kind}")
    return value


def _at_least(value: int, low: int, key: str) -> int:
    if value < low:
        raise _ContentError(_STATE, f"{key!r} is {value}, below {low}")
    return value


def _check_record(state: Any) -> None:
    top = "the state"
    _at_least(_need(state, "epoch", _INT, top), 0, "epoch")
    next_batch = _at_least(_need(state, "next_batch", _INT, top), 0, "next_batch")
    _at_least(_need(state, "step", _INT, top), 0, "step")
    # absent from the records of earlier versions (one process); present, a count: 0 or null is refused, not read as 1
    world = _at_least(_need(state, "world_size", _INT, top) if "world_size" in state else 1, 1, "world_size")
    _need(state, "validated", _BOOL, top, optional=True)
    _check_rng(_need(state, "rng", _DICT, top), "rng")
    ranks = _need(state, "rng_ranks", _LIST, top, optional=True)
    if world > 1:
        if ranks is None or len(ranks) != world:
            raise _ContentError(_STATE, f"'rng_ranks' must hold the RNG state of each of the {world} ranks")
        for rank, rng in enumerate(ranks):
            _check_rng(rng, f"rng_ranks[{rank}]")
    if _need(state, "settings", _DICT, top, optional=True) is None:
        _need(state, "config", _DICT, top)  # a record of an earlier version: its settings are here
    _check_numerics(_need(state, "numerics", _DICT, top, optional=True))  # absent from earlier versions' records
    _need(state, "scheduler", _DICT, top, optional=True)
    _check_optimizer_record(_need(state, "optimizer", _DICT, top))
    meta = _need(state, "accumulator", _DICT, top)
    _check_accumulator_record(meta, next_batch, world)
    _check_window(_need(state, "window", _DICT, top), meta)


def _check_numerics(numerics: dict[str, Any] | None) -> None:
    if numerics is not None:
        try:
            NumericsFingerprint.from_dict(numerics)
        except ValueError as problem:
            raise _ContentError(_STATE, f"'numerics': {problem}") from None


def _check_fit(learner: Learner, state: dict[str, Any], loader: DataLoader) -> None:
    if state["next_batch"] > len(loader):
        raise _ContentError(_STATE, f"'next_batch' is {state['next_batch']}, beyond the {len(loader)} micro-batches "
                                    "of an epoch of this data")
    scheduler, scheduler_state = learner.config.lr_scheduler, state["scheduler"]
    if scheduler is not None and scheduler_state is not None:
        _try_load("scheduler", lambda: copy.deepcopy(scheduler).load_state_dict(scheduler_state))
    opt = state["optimizer"]
    if not learner.config.allow_config_change:  # else this run's own hyperparameters are kept
        # load_state_dict checks them as the constructor does, changing nothing unless all fit; a
        # shallow copy takes the new values, the optimizer itself keeps its own
        _try_load("optimizer", lambda: copy.copy(learner.optimizer).load_state_dict(
            {"step_count": opt["step_count"], "hyperparameters": opt["hyperparameters"], "state": {}}))
    scaler, scaler_state = learner.accumulator.loss_scaler, state["accumulator"].get("loss_scaler")
    if scaler is not None and scaler_state:
        _try_load("loss_scaler", lambda: copy.deepcopy(scaler).load_state_dict(scaler_state))


def _check_rng(rng: Any, key: str) -> None:
    name = _need(rng, "bit_generator", _STR, key)
    generator = getattr(np.random, name, None)
    if not (isinstance(generator, type) and issubclass(generator, np.random.BitGenerator)):
        raise _ContentError(_STATE, f"{key!r} names the bit generator {name!r}, which NumPy does not have")
    try:
        generator().state = rng
    except (TypeError, ValueError, KeyError) as exc:
        raise _ContentError(_STATE, f"{key!r} is not a {name} state ({exc})") from None


def _try_load(key: str, load: Any) -> None:
    try:
        load()
    except (KeyError, TypeError, ValueError) as exc:
        raise _ContentError(_STATE, f"{key!r} does not fit this run ({type(exc).__name__}: {exc})") from None


def _check_optimizer_record(opt: dict[str, Any]) -> None:
    where = "optimizer"
    _at_least(_need(opt, "step_count", _INT, where), 0, "step_count")
    _at_least(_need(opt, "skipped_steps", _INT, where), 0, "skipped_steps")
    _need(opt, "hyperparameters", _DICT, where)
    for name, slots in _need(opt, "scalars", _DICT, where).items():
        if type(slots) is not dict:
            raise _ContentError(_STATE, f"the optimizer scalars of {name!r} are not an object")


def _check_accumulator_record(meta: dict[str, Any], next_batch: int, world: int) -> None:
    where = "accumulator"
    _at_least(_need(meta, "steps", _INT, where), 1, "steps")
    _need(meta, "reduction", _STR, where)
    _need(meta, "fusion", _STR, where)
    micro = _at_least(_need(meta, "micro_step", _INT, where), 0, "micro_step")
    _at_least(_need(meta, "items", _INT, where), 0, "items")
    _at_least(_need(meta, "window_index", _INT, where), 0, "window_index")
    if not all(type(w) is int for w in _need(meta, "skipped_windows", _LIST, where)):
        raise _ContentError(_STATE, "'skipped_windows' must list window numbers (ints)")
    _need(meta, "store", _DICT, where)
    _need(meta, "loss_scaler", _DICT, where, optional=True)
    if world == 1 and micro > next_batch:
        raise _ContentError(_STATE, f"the window holds {micro} micro-batches, but its position is micro-batch "
                                    f"{next_batch}")


def _check_window(window: dict[str, Any], meta: dict[str, Any]) -> None:
    expected = set(WindowTotals().state())
    if set(window) != expected:
        raise _ContentError(_STATE, f"'window' holds the keys {sorted(window)}, expected {sorted(expected)}")
    for key, kind in (("loss_sum", _NUMBER), ("items", _INT), ("micro", _INT), ("seconds", _NUMBER),
                      ("peak", _INT)):
        _need(window, key, kind, "window")
    _need(window, "correct", _INT, "window", optional=True)
    _need(window, "array_peak", _INT, "window", optional=True)
    if window["micro"] != meta["micro_step"] or window["items"] != meta["items"]:
        raise _ContentError(_STATE, f"the window records {window['items']} items in {window['micro']} micro-batches, "
                               f"the accumulator {meta['items']} items in {meta['micro_step']}")


def _array(file: str, name: str, value: Any, shape: tuple[int, ...], dtype: np.dtype, finite: bool = True) -> None:
    if tuple(value.shape) != tuple(shape):
        raise _ContentError(file, f"{name!r} has shape {tuple(value.shape)}, expected {tuple(shape)}")
    if value.dtype != dtype:
        raise _ContentError(file, f"{name!r} is {value.dtype.name}, expected {np.dtype(dtype).name}")
    # bfloat16 (ml_dtypes) is of kind "V", not "f": named, or its NaN weights would pass
    if finite and (value.dtype.kind in "fc" or value.dtype.name in _SIXTEEN_BIT):
        bad = int(np.count_nonzero(~np.isfinite(value.astype(np.float64) if value.dtype.itemsize < 4 else value)))
        if bad:
            raise _ContentError(file, f"{name!r} holds {bad} non-finite value(s) (NaN or inf)")


def _host_dtype(value: Any) -> np.dtype:
    return np.dtype(value.dtype) if hasattr(value, "dtype") else np.asarray(value).dtype


def _check_model(learner: Learner, saved: dict[str, np.ndarray]) -> None:
    file = "model.safetensors"
    model = learner.step_model
    targets: dict[str, Any] = {name: p.data for name, p in model.named_parameters()}
    targets.update({name: buffer.value for name, buffer in model.named_buffers()})
    missing, unexpected = sorted(set(targets) - set(saved)), sorted(set(saved) - set(targets))
    if missing or unexpected:
        parts = ([f"lacks {', '.join(map(repr, missing))}"] if missing else []) + \
                ([f"holds {', '.join(map(repr, unexpected))}, which {type(model).__name__} does not have"]
                 if unexpected else [])
        raise _ContentError(file, "; ".join(parts))
    for name, target in targets.items():
        _array(file, name, saved[name], tuple(target.shape), _host_dtype(target))


def _check_optimizer(learner: Learner, saved: dict[str, np.ndarray], opt: dict[str, Any]) -> None:
    file = "optimizer.safetensors"
    optimizer = learner.optimizer
    params = dict(learner.step_model.named_parameters())
    held: dict[str, set[str]] = {name: set() for name in opt["scalars"]}
    for key, value in saved.items():
        name, _, slot = key.rpartition("/")
        if name not in params:
            raise _ContentError(file, f"{key!r} names the parameter {name!r}, which "
                                      f"{type(learner.step_model).__name__} does not have")
        param_dtype = _host_dtype(params[name].data)
        # moments (and the master copy) of a 16-bit parameter are float32
        dtype = np.dtype(np.float32) if param_dtype.name in _SIXTEEN_BIT else param_dtype
        _array(file, key, value, tuple(params[name].shape), dtype)
        held.setdefault(name, set()).add(slot)
    for name, slots in held.items():
        if name not in params:
            raise _ContentError(_STATE, f"the optimizer state names the parameter {name!r}, which the model does "
                                        "not have")
        group = optimizer.group_index(params[name])
        if group is None:
            continue
        required = optimizer.state_array_slots(optimizer.param_groups[group])
        if required is None:
            continue
        needed = set(required) | ({"master"} if _host_dtype(params[name].data).name in _SIXTEEN_BIT else set())
        if needed and slots != needed:
            lacking, extra = sorted(needed - slots), sorted(slots - needed)
            text = f"the state of {name!r} lacks {', '.join(lacking)}" if lacking else \
                f"the state of {name!r} holds {', '.join(extra)}, which {type(optimizer).__name__} does not keep"
            raise _ContentError(file, text)


def _check_accumulator(learner: Learner, saved: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    file = "accumulator.safetensors"
    if not meta["micro_step"]:
        return  # between windows the arena holds nothing to resume
    store = learner.accumulator.store
    arena = getattr(store, "arena", None)
    if arena is not None:  # the arena store: one flat buffer per dtype (and its compensation)
        expected = {f"arena/{dtype.name}": buffer for dtype, buffer in arena.buffers.items()}
        compensation = getattr(store, "compensation", None)
        if compensation is not None:
            expected.update({f"compensation/{dtype.name}": buffer for dtype, buffer in compensation.buffers.items()})
    else:  # summed containers: the gradient of each parameter written so far
        params = dict(learner.step_model.named_parameters())
        unknown = [key for key in saved if key.partition("/")[2] not in params or not key.startswith("grad/")]
        if unknown:
            raise _ContentError(file, f"holds {', '.join(map(repr, unknown))}, no parameter's gradient")
        expected = {key: params[key.partition("/")[2]].data for key in saved}
    missing = sorted(set(expected) - set(saved))
    if missing or set(saved) - set(expected):
        raise _ContentError(file, f"holds {sorted(saved)}, expected {sorted(expected)}")
    for key, buffer in expected.items():
        # a window may hold a non-finite gradient (its step is then skipped): not checked
        _array(file, key, saved[key], tuple(buffer.shape), _host_dtype(buffer), finite=False)

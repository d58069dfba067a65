"""What a Learner's checkpoint must hold before a resume loads any of it.

The checkpoint package verifies bytes (every file against its SHA-256, the record against its
own); a record can still be re-signed by hand, or written by another model. So a resume first
checks the contents against the learner it is about to fill: every state key with its type
(each one a checkpoint of this version writes, and no other; the numerics fingerprint field by
field), the model's arrays by name, shape
and dtype and finite, each optimizer slot the optimizer keeps (by name, shape and dtype, finite;
none dropped), the accumulator's arrays and the window's sums, the RNG, scheduler and
loss-scaler states, and the record's facts against each other and the data: the position is a
window boundary of the recorded settings (or inside one window, one process), the optimizer
steps are the windows closed before it, the window's items are those of its micro-batches, a
pending validation is at an epoch's end. The first thing wrong raises one CheckpointError naming
it and the file it is in; nothing has been loaded then, so the learner, its model and the
checkpoint directory are as they were.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.backend.numerics import NumericsFingerprint
from minitorch_accum.data import DataLoader
from minitorch_accum.nn import Module
from minitorch_accum.nn import functional as F
from minitorch_accum.train.checkpoint import CheckpointError
from minitorch_accum.train.run_parts import RunParts
from minitorch_accum.train.run_settings import micro_batch_record, upgrade_record
from minitorch_accum.train.step import Classifier
from minitorch_accum.train.window_record import WindowTotals

__all__ = ["STATE_KEYS", "check_checkpoint_contents", "check_checkpoint_record"]

#: the keys of a Learner checkpoint's state, as ``train/resume.py`` writes them
STATE_KEYS = ("epoch", "next_batch", "step", "world_size", "validated", "rng", "rng_ranks", "scheduler",
              "optimizer", "accumulator", "window", "settings", "config", "window_origin", "numerics")
# what earlier versions wrote, oldest first (each added keys to the one before): a record holds exactly
# the keys of one of them, so a key dropped from a record of its version is refused, not defaulted
_FIRST_LAYOUT = ("epoch", "next_batch", "step", "rng", "scheduler", "optimizer", "accumulator", "window", "config")
_LAYOUTS = tuple(_FIRST_LAYOUT + added for added in (
    (),  # no settings (reduction and fusion are in config), one process, validated
    ("world_size", "validated", "settings"),
    ("world_size", "validated", "settings", "rng_ranks"),
    # the windows' origin and the numerics fingerprint (this version)
    ("world_size", "validated", "settings", "rng_ranks", "window_origin", "numerics"),
))
assert set(_LAYOUTS[-1]) == set(STATE_KEYS)
_OPTIMIZER_KEYS = ("step_count", "skipped_steps", "hyperparameters", "scalars")
_ACCUMULATOR_KEYS = ("steps", "reduction", "fusion", "micro_step", "items", "window_index", "skipped_windows",
                     "loss_scaler", "store")
_CONFIG_KEYS = ("reduction", "fusion", "num_epochs", "checkpoint_every_steps")  # the last: absent from earlier records
_ORIGIN_KEYS = ("epoch", "next_batch", "step")

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


def check_checkpoint_contents(run: RunParts, arrays: dict[str, dict[str, np.ndarray]], state: dict[str, Any],
                              loader: DataLoader, checkpoint: Path | None) -> None:
    """CheckpointError naming the first thing in ``arrays``/``state`` (a checked record) that does not
    fit the ``run`` (its configuration, model, optimizer and accumulator) and ``loader``."""
    with _reported(checkpoint):
        _check_fit(run, state, loader)
        _check_model(run.step_model, arrays.get("model", {}))
        _check_optimizer(run, arrays.get("optimizer", {}), state["optimizer"])
        _check_accumulator(run, arrays.get("accumulator", {}), state["accumulator"])


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


def _only_keys(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise _ContentError(_STATE, f"{where} holds {', '.join(map(repr, unknown))}, which no checkpoint of this "
                                    "version writes")


def _check_record(state: Any) -> None:
    top = "the state"
    if type(state) is not dict:
        raise _ContentError(_STATE, "the state is not an object")
    _only_keys(state, STATE_KEYS, "the state")
    _check_layout(state)
    epoch = _at_least(_need(state, "epoch", _INT, top), 0, "epoch")
    next_batch = _at_least(_need(state, "next_batch", _INT, top), 0, "next_batch")
    step = _at_least(_need(state, "step", _INT, top), 0, "step")
    # absent from the first layout (one process); present, a count: 0 or null is refused, not read as 1
    world = _at_least(_need(state, "world_size", _INT, top) if "world_size" in state else 1, 1, "world_size")
    _need(state, "validated", _BOOL, top, optional="validated" not in state)
    _check_rng(_need(state, "rng", _DICT, top), "rng")
    ranks = _need(state, "rng_ranks", _LIST, top, optional=True)
    if world > 1:
        if ranks is None or len(ranks) != world:
            raise _ContentError(_STATE, f"'rng_ranks' must hold the RNG state of each of the {world} ranks")
        for rank, rng in enumerate(ranks):
            _check_rng(rng, f"rng_ranks[{rank}]")
    settings = _need(state, "settings", _DICT, top, optional="settings" not in state) or {}
    if "world_size" in settings and settings["world_size"] != world:  # k per rank is read with it
        raise _ContentError(_STATE, f"the settings' world_size is {settings['world_size']!r:.60}, the state's {world}")
    config = _need(state, "config", _DICT, top)
    _check_config(config, settings)
    _check_numerics(_need(state, "numerics", _DICT, top, optional="numerics" not in state))
    _need(state, "scheduler", _DICT, top, optional=True)
    _check_optimizer_record(_need(state, "optimizer", _DICT, top))
    meta = _need(state, "accumulator", _DICT, top)
    _check_accumulator_record(meta, next_batch, world)
    for key in ("reduction", "fusion"):
        if meta[key] != config[key]:
            raise _ContentError(_STATE, f"the accumulator's {key} is {meta[key]!r}, the config's {config[key]!r}")
    _check_window(_need(state, "window", _DICT, top), meta)
    if "window_origin" in state:
        _check_origin(_need(state, "window_origin", _DICT, top), (epoch, next_batch - meta["micro_step"]), step)


def _check_layout(state: dict[str, Any]) -> None:
    """The keys of ``state`` are those of one version's layout: else the first key missing is named."""
    held = set(state)
    if any(held == set(layout) for layout in _LAYOUTS):
        return
    closest = next((layout for layout in _LAYOUTS if held <= set(layout)), _LAYOUTS[-1])
    missing = next(key for key in closest if key not in held)
    later = [key for key in closest if key in held and key not in _FIRST_LAYOUT]
    raise _ContentError(_STATE, f"lacks {missing!r}" + (
        f" (a record that holds {later[0]!r} was written with it)" if later and missing not in _FIRST_LAYOUT else ""))


def _check_config(config: dict[str, Any], settings: dict[str, Any]) -> None:
    _only_keys(config, _CONFIG_KEYS, "'config'")
    for key in ("reduction", "fusion"):
        _need(config, key, _STR, "config")
        if key in settings and settings[key] != config[key]:
            raise _ContentError(_STATE, f"the config's {key} is {config[key]!r}, the settings' {settings[key]!r}")
    _at_least(_need(config, "num_epochs", _INT, "config"), 1, "num_epochs")
    every = _need(config, "checkpoint_every_steps", _INT, "config", optional=True)
    if every is not None:
        _at_least(every, 0, "checkpoint_every_steps")


def _check_origin(origin: dict[str, Any], position: tuple[int, int], step: int) -> None:
    _only_keys(origin, _ORIGIN_KEYS, "'window_origin'")
    at = tuple(_at_least(_need(origin, key, _INT, "window_origin"), 0, key) for key in _ORIGIN_KEYS)
    if at[:2] > position or at[2] > step:
        raise _ContentError(_STATE, f"'window_origin' is epoch {at[0]}, micro-batch {at[1]}, step {at[2]}: after "
                                    f"the checkpoint's own position (epoch {position[0]}, micro-batch {position[1]}, "
                                    f"step {step})")


def _check_numerics(numerics: dict[str, Any] | None) -> None:
    if numerics is not None:
        try:
            NumericsFingerprint.from_dict(numerics)
        except ValueError as problem:
            raise _ContentError(_STATE, f"'numerics': {problem}") from None


def _check_fit(run: RunParts, state: dict[str, Any], loader: DataLoader) -> None:
    if state["next_batch"] > len(loader):
        raise _ContentError(_STATE, f"'next_batch' is {state['next_batch']}, beyond the {len(loader)} micro-batches "
                                    "of an epoch of this data")
    _check_position(run.step_model, state, loader)
    scheduler, scheduler_state = run.config.lr_scheduler, state["scheduler"]
    if scheduler is not None and scheduler_state is not None:
        _try_load("scheduler", lambda: copy.deepcopy(scheduler).load_state_dict(scheduler_state))
    opt = state["optimizer"]
    if not run.config.allow_config_change:  # else this run's own hyperparameters are kept
        # load_state_dict checks them as the constructor does, changing nothing unless all fit; a
        # shallow copy takes the new values, the optimizer itself keeps its own
        _try_load("optimizer", lambda: copy.copy(run.optimizer).load_state_dict(
            {"step_count": opt["step_count"], "hyperparameters": opt["hyperparameters"], "state": {}}))
    scaler, scaler_state = run.accumulator.loss_scaler, state["accumulator"].get("loss_scaler")
    if scaler is not None and scaler_state:
        _try_load("loss_scaler", lambda: copy.deepcopy(scaler).load_state_dict(scaler_state))


def _window_size(settings: dict[str, Any], epoch: int) -> int | None:
    """Micro-batches (of all ranks) in a window of ``epoch`` under the recorded settings (in this
    version's layout: k per rank and the ranks); None when the record does not say."""
    schedule = settings.get("accumulation_schedule")
    if isinstance(schedule, dict) and schedule:
        starts = [int(e) for e in schedule if str(e).isdigit() and int(e) <= epoch]
        k = schedule.get(str(max(starts))) if starts else None
    elif settings.get("effective_batch") and type(settings.get("micro_batch")) is int:
        size = settings["effective_batch"] // settings["micro_batch"]
        return size if type(size) is int and size > 0 else None
    else:
        k = settings.get("grads_accumulation")
    world = settings.get("world_size")
    return k * world if type(k) is int and k > 0 and type(world) is int and world > 0 else None


def _windows(micro_batches: int, size: int, first: int, drop_last: bool) -> list[tuple[int, int]]:
    """(first, stop) of each window of an epoch from micro-batch ``first`` on (as ``rank_windows``)."""
    spans = [(start, min(start + size, micro_batches)) for start in range(first, micro_batches, size)]
    return [(a, b) for a, b in spans if not (drop_last and b - a < size)]


def _check_position(model: Module, state: dict[str, Any], loader: DataLoader) -> None:
    """The position, the steps and the window's items against each other, under the recorded settings:
    a hand-edited ``next_batch`` or ``step`` would resume, silently, to another run."""
    if "settings" not in state:
        return  # a record of the first layout does not say how large its windows were
    settings = upgrade_record(state["settings"], state["world_size"])
    if settings.get("micro_batch") not in (None, micro_batch_record(loader)):
        return  # an allowed change of the micro-batch: positions were counted in the old one
    epoch, next_batch, step = state["epoch"], state["next_batch"], state["step"]
    meta, world = state["accumulator"], state["world_size"]
    micro, start = meta["micro_step"], state["next_batch"] - meta["micro_step"]
    origin = state.get("window_origin") or dict.fromkeys(_ORIGIN_KEYS, 0)
    drop_last = bool(settings.get("drop_last_window"))
    sizes = {e: _window_size(settings, e) for e in range(origin["epoch"], epoch + 1)}
    if None in sizes.values():
        return  # a record that does not say how large its windows were
    if meta["steps"] * world != sizes[epoch]:
        raise _ContentError(_STATE, f"the accumulator's window is {meta['steps']} micro-batches x {world} rank(s), "
                                    f"the settings' {sizes[epoch]} in epoch {epoch}")
    n = len(loader)
    expected = origin["step"] + sum(
        len(_windows(n, sizes[e], origin["next_batch"] if e == origin["epoch"] else 0, drop_last))
        for e in range(origin["epoch"], epoch))
    first = origin["next_batch"] if epoch == origin["epoch"] else 0
    windows = _windows(n, sizes[epoch], first, drop_last)
    boundaries = [first] + [stop for _, stop in windows]
    grid = f"windows of {sizes[epoch]} micro-batches" + (f" from micro-batch {first}" if first else "")
    held = f" with {micro} micro-batch(es) of an open window" if micro else ""
    if start not in boundaries:
        raise _ContentError(_STATE, f"'next_batch' is {next_batch}{held}, which puts a window's start at micro-batch "
                                    f"{start} of epoch {epoch}: not a window boundary ({grid})")
    if micro and not any(a == start and next_batch < b for a, b in windows):
        raise _ContentError(_STATE, f"'next_batch' is {next_batch}{held}: beyond the window that starts at "
                                    f"micro-batch {start} ({grid})")
    expected += sum(stop <= start for _, stop in windows)
    if step != expected:
        raise _ContentError(_STATE, f"'step' is {step}, but micro-batch {start} of epoch {epoch} comes after "
                                    f"{expected} optimizer steps ({grid} over epochs of {n} micro-batches)")
    if not state["validated"] and (micro or start != boundaries[-1]):
        raise _ContentError(_STATE, f"'validated' is false at micro-batch {next_batch} of epoch {epoch}: only a "
                                    "checkpoint at an epoch's end waits for its validation")
    if micro and world == 1 and isinstance(model, Classifier):
        items = sum(F.count_items(np.asarray(loader.batch(epoch, index)[1]), model.ignore_index)
                    for index in range(start, next_batch))
        if items != meta["items"]:
            raise _ContentError(_STATE, f"the window records {meta['items']} items, but its micro-batches "
                                        f"{start}-{next_batch - 1} of epoch {epoch} hold {items}")


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
    _only_keys(opt, _OPTIMIZER_KEYS, "'optimizer'")
    _at_least(_need(opt, "step_count", _INT, where), 0, "step_count")
    _at_least(_need(opt, "skipped_steps", _INT, where), 0, "skipped_steps")
    _need(opt, "hyperparameters", _DICT, where)
    for name, slots in _need(opt, "scalars", _DICT, where).items():
        if type(slots) is not dict:
            raise _ContentError(_STATE, f"the optimizer scalars of {name!r} are not an object")


def _check_accumulator_record(meta: dict[str, Any], next_batch: int, world: int) -> None:
    where = "accumulator"
    _only_keys(meta, _ACCUMULATOR_KEYS, "'accumulator'")
    steps = _at_least(_need(meta, "steps", _INT, where), 1, "steps")
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
    if micro >= steps * world:
        raise _ContentError(_STATE, f"the window holds {micro} micro-batches, a whole window of {steps} x {world} "
                                    "rank(s): it would have closed")
    if world > 1 and micro:
        raise _ContentError(_STATE, f"the window holds {micro} micro-batches, but {world} ranks save only at "
                                    "a window's end")


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


def _check_model(model: Module, saved: dict[str, np.ndarray]) -> None:
    file = "model.safetensors"
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


def _check_optimizer(run: RunParts, saved: dict[str, np.ndarray], opt: dict[str, Any]) -> None:
    file = "optimizer.safetensors"
    optimizer = run.optimizer
    params = dict(run.step_model.named_parameters())
    held: dict[str, set[str]] = {name: set() for name in opt["scalars"]}
    for key, value in saved.items():
        name, _, slot = key.rpartition("/")
        if name not in params:
            raise _ContentError(file, f"{key!r} names the parameter {name!r}, which "
                                      f"{type(run.step_model).__name__} does not have")
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


def _check_accumulator(run: RunParts, saved: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    file = "accumulator.safetensors"
    if not meta["micro_step"]:
        return  # between windows the arena holds nothing to resume
    store = run.accumulator.store
    arena = getattr(store, "arena", None)
    if arena is not None:  # the arena store: one flat buffer per dtype (and its compensation)
        expected = {f"arena/{dtype.name}": buffer for dtype, buffer in arena.buffers.items()}
        compensation = getattr(store, "compensation", None)
        if compensation is not None:
            expected.update({f"compensation/{dtype.name}": buffer for dtype, buffer in compensation.buffers.items()})
    else:  # summed containers: the gradient of each parameter written so far
        params = dict(run.step_model.named_parameters())
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

"""The settings a run is made of, recorded in every checkpoint and compared on resume.

Resuming with other settings (k, the micro-batch, the optimizer or its learning rate,
the dataset or dtype of a command-line run) would silently mix two runs: the step
counts, the normalization and ``final.safetensors`` would contradict each other. So each
checkpoint records every row of ``train.settings.SETTINGS`` that a resume must keep (and
the optimizer's hyperparameters), and a resume refuses a difference with one line naming
every differing setting, unless the user explicitly allows it (then it says what changes).
A different number of data-parallel ranks is not a difference: the global batch is what
must stay, and k per rank is re-derived to keep it.
"""

from __future__ import annotations

from typing import Any

from minitorch_accum.optim import Optimizer
from minitorch_accum.train.settings import SETTINGS

__all__ = ["RECORD_VERSION", "SettingsMismatchError", "compare_settings", "describe_changes", "record_settings",
           "rescale_k", "upgrade_record"]

#: the layout of the settings record this version writes (records without one predate the table)
RECORD_VERSION = 2

# the window's size is recorded for all ranks together, so a resume on another number of ranks
# compares what must stay (the global window), not k per rank
_PER_RANK = frozenset({"grads_accumulation", "accumulation_schedule"})
# a command-line run of before the table recorded these as its run. (some were rows of the Learner
# too, or rows a resume may change); such a record is read in today's layout
_TABLELESS_RUN = frozenset({"dataset", "micro_batch", "accum", "epochs", "lr", "optimizer", "reduction", "fusion",
                            "dtype", "compensated", "seed", "block_size"})


# recorded rows added after version 2's records were first written: a record without one was made
# with its default (``rounding``: the arena rounded to nearest, as every arena then did)
_ADDED_ROWS = tuple(row for row in SETTINGS if row.name in ("rounding",))


class SettingsMismatchError(ValueError):
    """The run to resume was made with other settings."""


def record_settings(config: Any, micro_batch: int, world_size: int, optimizer: Optimizer) -> dict[str, Any]:
    """What a checkpoint records of this run: each learner row a resume must keep, the window
    in micro-batches of all ranks, the micro-batch, the optimizer and the caller's run settings."""
    record: dict[str, Any] = {"version": RECORD_VERSION, "micro_batch": micro_batch}
    for row in SETTINGS:
        if row.target == "learner" and not row.resume and row.name not in _PER_RANK:
            record[row.name] = getattr(config, row.name)
    record["window_micro_batches"] = None if config.effective_batch else config.grads_accumulation * world_size
    schedule = config.accumulation_schedule
    record["accumulation_schedule"] = None if schedule is None else {
        str(epoch): k * world_size for epoch, k in sorted(schedule.items())}
    record["optimizer"] = {"type": type(optimizer).__name__, **optimizer.hyperparameters()}
    record["run"] = config.run_config or {}
    return record


def upgrade_record(saved: dict[str, Any]) -> dict[str, Any]:
    """A settings record in this version's layout. One written before the table had no
    ``version``; its command-line run. held the seed (a learner row now) and values recorded
    elsewhere or free to change, which are dropped. A row added to the table since a record
    was written takes its default there (the run was made before the setting existed)."""
    if saved.get("version") == RECORD_VERSION:
        missing = {row.name: row.default for row in _ADDED_ROWS if row.name not in saved}
        return {**saved, **missing} if missing else saved
    upgraded = dict(saved)
    run = dict(saved.get("run") or {})
    if set(run) == _TABLELESS_RUN:
        upgraded["seed"] = run["seed"]
        run = {key: run[key] for key in ("dataset", "lr", "optimizer", "dtype", "block_size")}
    upgraded["run"] = run
    return upgraded


def _flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = list(value) if isinstance(value, tuple) else value
    return flat


def compare_settings(saved: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(setting, saved value, current value) for every recorded setting that differs.

    A record from before the table is compared on what it recorded: a setting it did not
    record cannot be told apart from its value then."""
    tableless = saved.get("version") != RECORD_VERSION
    old, new = _flatten(upgrade_record(saved)), _flatten(current)
    names = set(old) if tableless else set(old) | set(new)
    names.discard("version")
    return [(name, old.get(name), new.get(name)) for name in sorted(names) if old.get(name) != new.get(name)]


def describe_changes(changes: list[tuple[str, Any, Any]]) -> str:
    return ", ".join(f"{name} {old!r} -> {new!r}" for name, old, new in changes)


def rescale_k(saved_k: int, saved_world: int, world: int) -> int:
    """k per rank that keeps the global window (saved_world x saved_k micro-batches) on ``world`` ranks."""
    total = saved_k * saved_world
    if total % world:
        raise SettingsMismatchError(
            f"the checkpoint's window holds {total} micro-batches ({saved_world} rank(s) x k={saved_k}), which "
            f"{world} ranks cannot share equally; resume with a number of ranks that divides {total}")
    return total // world

"""The settings a run is made of, recorded in every checkpoint and compared on resume.

Resuming with other settings (k, the micro-batch, the optimizer or its learning rate,
the dataset or dtype of a command-line run) would silently mix two runs: the step
counts, the normalization and ``final.safetensors`` would contradict each other. So each
checkpoint records every row of ``train.settings.SETTINGS`` that a resume must keep (and
the optimizer's hyperparameters), and a resume refuses a difference with one line naming
every differing setting, unless the user explicitly allows it (then it says what changes).

k is recorded under its one name, ``grads_accumulation`` (per rank), beside ``world_size``:
the window of all ranks is derived (k x world_size), never recorded under a second name. What
decides the windows is what is recorded: beside a schedule or an effective batch, k is unused
and recorded as None. A different number of data-parallel ranks is not a difference: the
global window is what must stay, and k per rank is re-derived to keep it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minitorch_accum.optim import Optimizer
from minitorch_accum.train.settings import SETTINGS

__all__ = ["RECORD_VERSION", "SettingsMismatchError", "compare_settings", "describe_changes", "describe_micro_batch",
           "micro_batch_record", "record_settings", "rescale_k", "upgrade_record"]

#: the layout of the settings record this version writes (records without one predate the table;
#: version 2 recorded the window of all ranks as ``window_micro_batches``)
RECORD_VERSION = 3

# the rows whose value is k per rank (an int, or a schedule's ints): compared as windows of all ranks
_PER_RANK = ("grads_accumulation", "accumulation_schedule")
# a command-line run of before the table recorded these as its run. (some were rows of the Learner
# too, or rows a resume may change); such a record is read in today's layout
_TABLELESS_RUN = frozenset({"dataset", "micro_batch", "accum", "epochs", "lr", "optimizer", "reduction", "fusion",
                            "dtype", "compensated", "seed", "block_size"})


# recorded rows added after version 2's records were first written: a record without one was made
# with its default (``rounding``: the arena rounded to nearest, as every arena then did)
ADDED_ROWS = tuple(row for row in SETTINGS if row.name in ("rounding",))


class SettingsMismatchError(ValueError):
    """The run to resume was made with other settings."""


def micro_batch_record(loader: Any) -> int | dict[str, int]:
    """What a run records as its micro-batch: the loader's items per batch (DataLoader), or the
    token budget its micro-batches are cut by (TokenBudgetLoader: as many items as fit it)."""
    budget = getattr(loader, "max_tokens", None)
    return loader.batch_size if budget is None else {"token_budget": budget}


def describe_micro_batch(loader: Any) -> str:
    """The loader's micro-batch in words: ``32 items`` or ``up to 512 tokens``."""
    budget = getattr(loader, "max_tokens", None)
    return f"{loader.batch_size} items" if budget is None else f"up to {budget} tokens"


def record_settings(config: Any, micro_batch: int | dict[str, int], world_size: int,
                    optimizer: Optimizer) -> dict[str, Any]:
    """What a checkpoint records of this run: each learner row a resume must keep (k per rank
    when it decides the windows), the number of ranks, the micro-batch, the optimizer and the
    caller's run settings."""
    record: dict[str, Any] = {"version": RECORD_VERSION, "micro_batch": micro_batch, "world_size": world_size}
    for row in SETTINGS:
        if row.target == "learner" and not row.resume:
            record[row.name] = getattr(config, row.name)
    schedule = config.accumulation_schedule
    if schedule is not None or config.effective_batch is not None:
        record["grads_accumulation"] = None  # the schedule or the effective batch decides k
    record["accumulation_schedule"] = None if schedule is None else {
        str(epoch): k for epoch, k in sorted(schedule.items())}
    record["optimizer"] = {"type": type(optimizer).__name__, **optimizer.hyperparameters()}
    record["run"] = config.run_config or {}
    return record


def upgrade_record(saved: dict[str, Any], world_size: int) -> dict[str, Any]:
    """A settings record of a checkpoint written by ``world_size`` ranks, in this version's layout.

    Versions up to 2 recorded the window of all ranks, ``window_micro_batches`` (k x ranks, and
    each epoch's k x ranks of a schedule), even where a schedule or an effective batch decided
    k: read as k per rank, None where it did not decide. One written before the table had no
    ``version`` (it keeps none, so a comparison knows it); its command-line run. held the seed
    (a learner row now) and values recorded elsewhere or free to change, which are dropped. A row
    added to the table since a record was written takes its default there (the run was made
    before the setting existed)."""
    # a record with no version predates the table: it keeps what it held, for the comparison to read
    missing = {row.name: row.default for row in ADDED_ROWS if row.name not in saved} if "version" in saved else {}
    if saved.get("version") == RECORD_VERSION:
        return {**saved, **missing} if missing else saved
    upgraded = {**saved, **missing}
    if "window_micro_batches" in upgraded:
        window = upgraded.pop("window_micro_batches")
        schedule = upgraded.get("accumulation_schedule")
        decided = schedule is not None or upgraded.get("effective_batch") is not None
        upgraded["grads_accumulation"] = None if decided or not isinstance(window, int) else window // world_size
        if isinstance(schedule, dict):
            upgraded["accumulation_schedule"] = {
                epoch: total // world_size if isinstance(total, int) else total for epoch, total in schedule.items()}
        upgraded["world_size"] = world_size
        if "version" in saved:
            upgraded["version"] = RECORD_VERSION
    run = dict(saved.get("run") or {})
    if "version" not in saved and set(run) == _TABLELESS_RUN:
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


@dataclass(frozen=True, eq=False)
class _OnRanks:
    """k per rank on ``ranks`` ranks: equal to another when their windows of all ranks are."""

    k: int
    ranks: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OnRanks) and self.k * self.ranks == other.k * other.ranks

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{self.k} x {self.ranks} rank(s)"


def _windows_of_all_ranks(flat: dict[str, Any], world_size: Any) -> dict[str, Any]:
    """``flat`` with each k per rank as the window it makes on ``world_size`` ranks."""
    return {name: _OnRanks(value, world_size) if name.split(".")[0] in _PER_RANK and type(value) is int else value
            for name, value in flat.items()}


def compare_settings(saved: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(setting, saved value, current value) for every recorded setting that differs; ``saved`` is
    in this version's layout (``upgrade_record``). The number of ranks is not a setting: on
    another one, k per rank is compared as the window it makes (``6 x 1 rank(s) -> 4 x 2 rank(s)``).

    A record from before the table is compared on what it recorded: a setting it did not
    record cannot be told apart from its value then."""
    tableless = "version" not in saved
    old, new = _flatten(saved), _flatten(current)
    saved_world, world = old.pop("world_size", None), new.pop("world_size", None)
    if saved_world is not None and world is not None and saved_world != world:
        old, new = _windows_of_all_ranks(old, saved_world), _windows_of_all_ranks(new, world)
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

"""What ``maccum train --resume --out DIR`` rebuilds its run from: the options that run recorded.

A resume continues one run, so it takes that run's options from the record of DIR's latest
intact checkpoint (``train/run_settings.py``): the task rows (``run.``: dataset, lr, optimizer,
dtype, block size), the rows a resume must keep (k per rank, the micro-batch, reduction, fusion,
compensation, seed), the epochs and the checkpoint cadence. Only the options the user typed count
as changes: a typed change of a row a resume must keep is refused by the resume's comparison
(``train/resume.py``, naming the row) unless allowed; a typed change of the epochs or the cadence
is said in one line.
What belongs to one invocation (device, ranks, progress, threads, trace, the monitor) is not
recorded: it takes its default unless typed.

Rank 0 alone reads the directory (hosts need not share a file system) and hands the record to
every rank; a directory without a checkpoint, or a complete run, is said on every rank alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minitorch_accum.distributed import Communicator
from minitorch_accum.distributed.checkpoint_broadcast import broadcast_json
from minitorch_accum.distributed.rank_agreement import RankStartError
from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer
from minitorch_accum.train.checkpoint_contents import check_checkpoint_record
from minitorch_accum.train.resume import FINAL, check_run_not_complete, read_final_record
from minitorch_accum.train.run_directory import CHECKPOINTS, RunCompleteError, RunDirectoryError
from minitorch_accum.train.run_settings import ADDED_ROWS, SettingsMismatchError, upgrade_record
from minitorch_accum.train.setting_kinds import Flag
from minitorch_accum.train.settings import Setting, commanded

__all__ = ["RecordedOptions", "read_recorded_options", "resumed_options"]

_COMMAND = "train"
# rows a resume may change that a checkpoint records beside its settings, in its "config": the run's
# length and checkpoint cadence (the epochs of a run that finished after it are its final record's)
_IN_CONFIG = ("num_epochs", "checkpoint_every_steps")
# what a restore requires of a checkpoint: the record is read from the one the restore will load
_REQUIRED = ("model", "optimizer", "accumulator")


@dataclass(frozen=True)
class RecordedOptions:
    """The options of ``maccum train`` that a run's checkpoint recorded, by row name, and that checkpoint."""

    checkpoint: str
    values: dict[str, Any]


def _recorded_by_row(row: Setting) -> bool:
    """Whether a checkpoint records the row's value: each row a resume must keep, and those of its config."""
    return not row.resume or row.name in _IN_CONFIG


def _needed(row: Setting) -> bool:
    """Whether a resume must know the row's value: a flag's absence is its off state, and a row whose
    command-line default is None leaves the choice to the task (block size); the others must be given
    when the record lacks them, but a row added since (``ADDED_ROWS``): a run before it had its default."""
    return (not row.resume and not isinstance(row.kind, Flag) and row.command_default(_COMMAND) is not None
            and row not in ADDED_ROWS)  # a run recorded before the row existed had its default


def _values_of(state: dict[str, Any]) -> dict[str, Any]:
    """Each ``train`` option's value in a checked checkpoint ``state``, where its record holds one that
    the row accepts (a k decided by a schedule is None: not one the command line can give)."""
    if "settings" in state:
        settings = upgrade_record(state["settings"], int(state.get("world_size", 1)))
    else:  # the first layout recorded only these
        settings = {key: state["config"][key] for key in ("reduction", "fusion")}
    values: dict[str, Any] = {}
    for row in commanded(_COMMAND):
        if not _recorded_by_row(row):
            continue
        if row.name in _IN_CONFIG:
            table = state["config"]
        elif row.target == "task":
            table = settings.get("run") or {}
        else:
            table = settings
        if row.name not in table:
            continue
        try:
            values[row.name] = row.check(table[row.name])
        except (ValueError, TypeError):
            continue
    return values


def _read(directory: Path, num_epochs: int | None) -> dict[str, Any]:
    """Rank 0: the record of ``directory``'s latest intact checkpoint (what a restore will load; nothing
    damaged is set aside here, before the run's lock is held)."""
    checkpointer = FileCheckpointer(directory / CHECKPOINTS)
    try:
        loaded = checkpointer.load_checkpoint(require=_REQUIRED)
    except CheckpointError:
        final = read_final_record(directory / FINAL)
        if final is not None:  # complete: said so, or why it cannot go on to more epochs
            check_run_not_complete(directory, num_epochs or final["epochs"])
        if checkpointer.checkpoints():
            raise  # there are checkpoints, none intact: it says what is wrong with each
        where = "does not exist" if not directory.exists() else "holds no checkpoint (a run saves one every " \
            "--checkpoint-every optimizer steps and when it is stopped)"
        raise RunDirectoryError(f"nothing to resume in {directory}: it {where}") from None
    check_checkpoint_record(loaded.state, loaded.path)  # keys and types, before anything reads them
    values = _values_of(loaded.state)
    final = read_final_record(directory / FINAL)
    if final is not None and loaded.state["step"] <= final["steps"]:
        values["num_epochs"] = final["epochs"]  # the run went on after this checkpoint and finished
    check_run_not_complete(directory, num_epochs or values["num_epochs"])
    return {"checkpoint": str(loaded.path), "values": values}


def read_recorded_options(directory: str | Path, comm: Communicator, num_epochs: int | None = None) -> RecordedOptions:
    """What the run in ``directory`` recorded of its options, on every rank (rank 0 reads it).

    ``num_epochs``: the epochs the user typed (None: the recorded ones), to tell a complete run.
    RunCompleteError when the run is complete for them; RunDirectoryError when there is nothing to
    resume; CheckpointError when no checkpoint is intact. Data-parallel, every rank raises the same
    (a RankStartError with rank 0's message, but a complete run is a RunCompleteError on each)."""
    directory = Path(directory)
    failure: Exception | None = None
    read: dict[str, Any] | None = None
    if comm.rank == 0:
        try:
            read = _read(directory, num_epochs)
        except RunCompleteError as complete:
            failure, read = complete, {"complete": str(complete)}
        except (RunDirectoryError, CheckpointError, OSError) as error:
            failure, read = error, {"error": str(error)}
    if comm.world_size > 1:
        read = broadcast_json(comm, read)
    assert read is not None
    if failure is not None:
        raise failure
    if "complete" in read:
        raise RunCompleteError(read["complete"], rank=comm.rank)
    if "error" in read:
        raise RankStartError(read["error"], comm)
    return RecordedOptions(read["checkpoint"], read["values"])


def resumed_options(values: Mapping[str, Any], typed: frozenset[str],
                    recorded: RecordedOptions) -> tuple[dict[str, Any], str | None]:
    """The values of a resume: each typed option's as typed, each other option's as ``recorded``
    (else its default: an option the run does not record belongs to this invocation); and the line
    that says the typed options that change a recorded value a resume may change (the epochs, the
    checkpoint cadence), or None. SettingsMismatchError naming the options to give when the record
    lacks one it needs."""
    resumed = dict(values)
    changed, missing = [], []
    for row in commanded(_COMMAND):
        held = row.name in recorded.values
        if row.name in typed:
            if row.resume and held and values[row.name] != recorded.values[row.name]:
                changed.append(f"{row.flag} {values[row.name]} (was {recorded.values[row.name]})")
        elif held:
            resumed[row.name] = recorded.values[row.name]
        elif _needed(row):
            missing.append(row.flag)
    if missing:
        them = "it" if len(missing) == 1 else "them"
        raise SettingsMismatchError(
            f"resume: the checkpoint {recorded.checkpoint} does not record {', '.join(missing)} (written by an "
            f"earlier version, or not by maccum train): give {them} as the run was started (maccum train --resume "
            f"--out {values['out']} {' '.join(f'{flag} ...' for flag in missing)})")
    return resumed, f"resuming with {', '.join(changed)}" if changed else None

"""The Learner's checkpoints: what one holds, saving it, resuming a run from it, the final file.

A checkpoint of a run holds the parameters, the optimizer's state, the gradient arena (so a
checkpoint taken mid-window resumes mid-window), the window's sums, the scheduler, every
rank's RNG state, the position in the data, where its windows began, the run's settings and
what rank 0 computed with (its numerics fingerprint, ``backend/numerics.py``). Rank 0 writes;
every rank takes part (its RNG state, ZeRO-1's shards). A resume restores all of it, refusing a
run made with other settings (``train/run_settings.py``) unless that is allowed; on a machine
that computes with another BLAS kernel or NumPy SIMD target it says so in one line (the resumed
run then equals an uninterrupted one up to rounding, not bit for bit), or refuses with
``strict_numerics``.

A run is complete when ``final.safetensors`` holds its parameters and, in the same file (so one
atomic replace writes both), the record that the run finished: its optimizer steps, epochs and
the time it was written. A resume of a complete run says so instead of training again.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from minitorch_accum.backend import get_rng_state, set_rng_state
from minitorch_accum.backend.numerics import (
    BIT_IDENTITY_NEEDS,
    NumericsFingerprint,
    numerics_differences,
    numerics_fingerprint,
)
from minitorch_accum.data import DataLoader
from minitorch_accum.distributed.checkpoint_broadcast import gather_json, share_checkpoint
from minitorch_accum.durable_files import describe_os_error, replace_file_atomically
from minitorch_accum.train.checkpoint import FileCheckpointer
from minitorch_accum.train.checkpoint.catalog import looks_intact, newest_first, scan
from minitorch_accum.train.checkpoint.leftovers import process_alive
from minitorch_accum.train.checkpoint_contents import check_checkpoint_contents, check_checkpoint_record
from minitorch_accum.train.progress import Progress
from minitorch_accum.train.run_directory import CHECKPOINTS, RunCompleteError, RunDirectoryError
from minitorch_accum.train.run_parts import RunParts
from minitorch_accum.train.run_settings import (
    SettingsMismatchError,
    compare_settings,
    describe_changes,
    describe_micro_batch,
    micro_batch_record,
    record_settings,
    rescale_k,
    upgrade_record,
)
from minitorch_accum.train.window_record import WindowTotals

__all__ = ["FINAL", "LearnerCheckpoints", "Resumed", "check_run_not_complete", "read_final_record"]

#: a checkpoint's position: (optimizer step, epoch, next micro-batch)
Position = tuple[int, int, int]
#: the run's final parameters, and the record that it finished
FINAL = "final.safetensors"
# the metadata of final.safetensors that marks a finished run (older versions wrote none)
_FINISHED = "minitorch_accum.run"


def read_final_record(path: Path) -> dict[str, Any] | None:
    """What ``final.safetensors`` at ``path`` says of the run that wrote it ({"steps", "epochs",
    "written_at"}), or None when it is missing, unreadable or written by an earlier version."""
    from safetensors import SafetensorError, safe_open

    try:
        if not path.is_file():
            return None
        with safe_open(str(path), "numpy") as handle:
            metadata = handle.metadata() or {}
        if metadata.get(_FINISHED) != "finished":
            return None
        return {"steps": int(metadata["steps"]), "epochs": int(metadata["epochs"]),
                "written_at": metadata["written_at"]}
    except (OSError, SafetensorError, KeyError, ValueError):
        return None


class Resumed(NamedTuple):
    """Where a restored checkpoint puts the loop: the next micro-batch to train, the optimizer steps
    taken, whether the last epoch's validation ran, and the open window's sums."""

    epoch: int
    next_batch: int
    step: int
    validated: bool
    window: WindowTotals


class LearnerCheckpoints:
    """Saves and restores one Learner's run in ``DIR/checkpoints`` (always there: periodic saves
    only when asked for, but an interrupted run always saves). It holds the run's parts; the
    loop's state (its step, whether it validated, the open window) comes with each save and goes
    back with a restore."""

    def __init__(self, run: RunParts) -> None:
        self.run = run
        self.checkpointer = FileCheckpointer(run.directory / CHECKPOINTS, keep=run.config.checkpoint_keep)
        #: what this run is made of, recorded in each checkpoint (set when fit starts)
        self.settings: dict[str, Any] = {}
        #: the position and path of the last checkpoint written or restored (a stop does not save it twice)
        self.last_saved: tuple[Position | None, Path | None] = (None, None)
        self.restored_from: Path | None = None
        #: (epoch, micro-batch, step) where the windows of these settings began: the run's start, or a
        #: resume that changed settings; a resume checks a checkpoint's position against it
        self.window_origin: dict[str, int] = {"epoch": 0, "next_batch": 0, "step": 0}
        self._numerics: NumericsFingerprint | None = None

    @property
    def numerics(self) -> NumericsFingerprint:
        """What this process computes with (taken once, when first asked: the ranks' check, a resume or a save)."""
        if self._numerics is None:
            self._numerics = numerics_fingerprint()
        return self._numerics

    def record(self, loader: DataLoader) -> dict[str, Any]:
        """This run's settings, for the checkpoints and the resume comparison."""
        run = self.run
        return record_settings(run.config, micro_batch_record(loader), run.comm.world_size, run.optimizer)

    # ---------------------------------------------------------------- save
    def save(self, epoch: int, next_batch: int, step: int, validated: bool, window: WindowTotals) -> Path | None:
        """A checkpoint at micro-batch ``next_batch`` of ``epoch``, after ``step`` optimizer steps, with
        the open ``window``'s sums. Rank 0 writes (and returns the path); every rank takes part (its RNG
        state is gathered)."""
        run = self.run
        rng = get_rng_state()
        rng_ranks = gather_json(run.comm, rng) if run.comm.world_size > 1 else None
        acc_state = run.accumulator.state_dict()
        if run.stepper is not run.optimizer:
            opt_state = run.stepper.state_dict()  # ZeRO-1 gathers the shards: every rank takes part
        if run.comm.rank != 0:
            # every rank knows where the last checkpoint was taken, so all decide alike whether a stop saves again
            self.last_saved = ((step, epoch, next_batch), None)
            return None
        if run.stepper is run.optimizer:
            opt_state = run.optimizer.state_dict()
        opt_arrays = {f"{name}/{slot}": value for name, slots in opt_state["state"].items()
                      for slot, value in slots.items() if isinstance(value, np.ndarray)}
        opt_scalars = {name: {slot: value for slot, value in slots.items() if not isinstance(value, np.ndarray)}
                       for name, slots in opt_state["state"].items()}
        config = run.config
        state = {
            "epoch": epoch, "next_batch": next_batch, "step": step,
            "world_size": run.comm.world_size, "validated": validated,
            "rng": rng, "rng_ranks": rng_ranks,
            "scheduler": None if config.lr_scheduler is None else config.lr_scheduler.state_dict(),
            "optimizer": {"step_count": opt_state["step_count"], "skipped_steps": opt_state["skipped_steps"],
                          "hyperparameters": opt_state["hyperparameters"], "scalars": opt_scalars},
            "accumulator": acc_state["meta"],
            "window": window.state(),
            "settings": self.settings,
            "numerics": self.numerics.as_dict(),
            # and, for a resume that takes them from here (``train/recorded_options.py``), the run's length and
            # checkpoint cadence: a resume may change them, so they are not among the compared settings
            "config": {"reduction": config.reduction, "fusion": config.fusion, "num_epochs": config.num_epochs,
                       "checkpoint_every_steps": config.checkpoint_every_steps},
            "window_origin": dict(self.window_origin),
        }
        arrays = {"model": run.step_model.to_record(), "optimizer": opt_arrays,
                  "accumulator": acc_state["arrays"]}
        path = self.checkpointer.save(f"step{step:07d}-epoch{epoch:04d}-batch{next_batch:06d}", arrays, state)
        self.last_saved = ((step, epoch, next_batch), path)
        return path

    # ---------------------------------------------------------------- resume
    def adopt_settings(self, state: dict[str, Any], loader: DataLoader, progress: Progress) -> None:
        """Refuse to resume a run made with other settings (unless allowed, then say what changes);
        on another number of ranks, re-derive k per rank (and a schedule's) so the window keeps its size."""
        run, config = self.run, self.run.config
        saved = state.get("settings")
        if saved is None:  # a checkpoint of the first layout: only these were recorded
            saved = {**self.settings, **{k: v for k, v in state["config"].items() if k in ("reduction", "fusion")}}
        saved_world = int(state.get("world_size", 1))
        saved = upgrade_record(saved, saved_world)
        if saved_world != run.comm.world_size:
            if state["accumulator"]["micro_step"]:
                raise SettingsMismatchError(
                    f"the checkpoint was taken mid-window by {saved_world} process(es); resume it with "
                    f"{saved_world}, or from a checkpoint taken at a window boundary")
            self._rescale_windows(saved, saved_world, loader, progress)
            self.settings = self.record(loader)
        changes = compare_settings(saved, self.settings)
        if changes and not config.allow_config_change:
            raise SettingsMismatchError(
                f"resume: the checkpoint in {self.checkpointer.directory} was written with other settings: "
                f"{describe_changes(changes)}; resume with the same settings, or allow the change "
                "(allow_config_change / --allow-config-change)")
        origin = state.get("window_origin", {"epoch": 0, "next_batch": 0, "step": 0})
        if changes:
            progress.message(f"resuming with changed settings: {describe_changes(changes)}")
            # the windows of the new settings begin here (a new k shifts every window after it)
            origin = {"epoch": state["epoch"], "next_batch": state["next_batch"] - state["accumulator"]["micro_step"],
                      "step": state["step"]}
        self.window_origin = dict(origin)

    def _rescale_windows(self, saved: dict[str, Any], saved_world: int, loader: DataLoader,
                         progress: Progress) -> None:
        """The same k (or schedule) as the checkpoint's, on another number of ranks: the k per rank
        that keeps each window (a k already divided by the ranks is kept, any other compared)."""
        config = self.run.config
        saved_k, world = saved["grads_accumulation"], self.run.comm.world_size
        if saved_k is not None and self.settings["grads_accumulation"] == saved_k:
            k = rescale_k(saved_k, saved_world, world)
            progress.message(
                f"resuming a run of {saved_world} rank(s) on {world}: k per rank {saved_k} -> {k}, so each "
                f"window keeps {saved_k * saved_world} micro-batches of {describe_micro_batch(loader)}")
            config.grads_accumulation = k
        schedule = saved["accumulation_schedule"]
        if schedule is not None and self.settings["accumulation_schedule"] == schedule:
            config.accumulation_schedule = {int(epoch): rescale_k(k, saved_world, world)
                                            for epoch, k in schedule.items()}

    def compare_numerics(self, state: dict[str, Any]) -> str | None:
        """None when the checkpoint was written computing as this process does (or by a version that did
        not record it); else one line saying what differs, or, ``strict_numerics``, SettingsMismatchError."""
        if state.get("numerics") is None:
            return None
        saved = NumericsFingerprint.from_dict(state["numerics"])  # checked with the record
        # the fields that can change this run's bits: its products are of its parameters' dtypes
        differences = numerics_differences([saved, self.numerics], {p.data.dtype for p in self.run.model.parameters()})
        if not differences:
            return None
        what = "; ".join(f"{name}: this checkpoint was written with {old}, this machine computes with {new}"
                         for name, (old, new) in differences.items())
        if self.run.config.strict_numerics:
            raise SettingsMismatchError(
                f"resume: strict numerics (--strict-numerics): {what} (checkpoint in {self.checkpointer.directory}); "
                f"{BIT_IDENTITY_NEEDS}")
        return (f"numerics: {what}: the resumed run equals an uninterrupted one up to rounding, not bit for bit "
                "(--strict-numerics refuses)")

    def restore(self, loader: DataLoader, progress: Progress, notes: list[str],
                alerts: list[str] | None = None) -> Resumed:
        """Load the newest intact checkpoint into the run's parts; return where the loop goes on.
        Lines for the user go to ``notes``, a numerics difference to ``alerts`` (else ``notes``)."""
        run = self.run
        loaded = None
        if run.comm.rank == 0:
            checkpoint = self.checkpointer.load_checkpoint(require=("model", "optimizer", "accumulator"),
                                                           set_aside_damaged=True)
            if checkpoint.message is not None:  # latest was damaged (kept aside): an older intact one is used
                print(checkpoint.message, file=sys.stderr, flush=True)  # whatever the progress mode
            loaded = (checkpoint.arrays, checkpoint.state)
            self.restored_from = checkpoint.path
        arrays, state = share_checkpoint(run.comm, loaded) if run.comm.world_size > 1 else loaded
        check_checkpoint_record(state, self.restored_from)  # keys and types, before anything reads them
        self.adopt_settings(state, loader, progress)
        differs = self.compare_numerics(state)
        if differs is not None:
            (notes if alerts is None else alerts).append(differs)
        check_checkpoint_contents(run, arrays, state, loader, self.restored_from)  # before loading any
        run.step_model.load_record(arrays["model"])
        opt = state["optimizer"]
        slots: dict[str, dict[str, Any]] = {name: dict(values) for name, values in opt["scalars"].items()}
        for key, value in arrays.get("optimizer", {}).items():
            name, slot = key.rsplit("/", 1)
            slots.setdefault(name, {})[slot] = value
        # an allowed change of settings keeps this run's hyperparameters (the message said which)
        hyperparameters = run.optimizer.hyperparameters() if run.config.allow_config_change \
            else opt["hyperparameters"]
        run.stepper.load_state_dict({"step_count": opt["step_count"], "skipped_steps": opt["skipped_steps"],
                                         "hyperparameters": hyperparameters, "state": slots},
                                        model=run.step_model)
        run.accumulator.load_state_dict({"meta": state["accumulator"], "arrays": arrays.get("accumulator", {})})
        scheduler = run.config.lr_scheduler
        if scheduler is not None and state["scheduler"] is not None:
            scheduler.load_state_dict(state["scheduler"])
        if int(state.get("world_size", 1)) == run.comm.world_size:  # else each rank keeps the stream it was seeded with
            set_rng_state(state["rng"] if run.comm.world_size == 1 else state["rng_ranks"][run.comm.rank])
        window = WindowTotals()
        window.load(state["window"])
        step = int(state["step"])
        epoch, next_batch = int(state["epoch"]), int(state["next_batch"])
        self.last_saved = ((step, epoch, next_batch), self.restored_from)  # a stop right away saves nothing
        if next_batch >= len(loader):
            epoch, next_batch = epoch + 1, 0
        notes.insert(0, f"resumed from step {step} (epoch {epoch}, micro-batch {next_batch})"
                        + (f" of {self.restored_from}" if run.comm.rank == 0 else ""))
        return Resumed(epoch, next_batch, step, bool(state.get("validated", True)), window)

    def save_final(self, steps: int) -> Path:
        """``DIR/final.safetensors``: the model's parameters and the record that the run finished
        (its ``steps`` optimizer steps, epochs, when), replaced atomically; returns its path."""
        from safetensors.numpy import save

        run = self.run
        path = run.directory / FINAL
        metadata = {_FINISHED: "finished", "steps": str(steps), "epochs": str(run.config.num_epochs),
                    "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            replace_file_atomically(path, save(run.model.to_record(), metadata=metadata),
                                    path.with_name(f".{FINAL}.tmp-{os.getpid()}"))
        except OSError as error:
            raise RunDirectoryError(f"cannot write {path}: {describe_os_error(error)}"
                                    + self._kept_instead()) from error
        return path

    def _kept_instead(self) -> str:
        _, path = self.last_saved
        return f"; the last checkpoint is {path} (resume from it)" if path is not None else \
            "; no checkpoint holds the trained parameters (keep checkpoints with --checkpoint-every)"

    def remove_leftovers(self) -> None:
        """What writers of this directory that are gone left half-written (a checkpoint's temporary
        directory, a temporary final file): removed when a run starts, under the run's lock."""
        self.checkpointer.remove_leftovers()
        for path in self.run.directory.glob(f".{FINAL}.tmp-*"):
            pid = path.name.rpartition("-")[2]
            if pid.isdigit() and not process_alive(int(pid)) and path.is_file() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.unlink()

    def check_not_complete(self, num_epochs: int) -> None:
        """Before a resume: ``check_run_not_complete`` of this run's directory."""
        check_run_not_complete(self.run.directory, num_epochs)


def check_run_not_complete(directory: Path, num_epochs: int) -> None:
    """Before a resume of the run in ``directory``: RunCompleteError when it finished (its final
    parameters and record written, no later checkpoint) for at least ``num_epochs`` epochs;
    RunDirectoryError when it finished for fewer but left no checkpoint to go on from."""
    final = read_final_record(directory / FINAL)
    if final is None:
        return
    intact = [entry for entry in scan(directory / CHECKPOINTS) if looks_intact(entry)]
    latest = newest_first(intact)[0].record["state"].get("step") if intact else None
    if isinstance(latest, int) and latest > final["steps"]:
        return  # a longer run went on after it (resumed with more epochs) and was stopped
    done = (f"{final['steps']} optimizer steps, {final['epochs']} epoch(s); {directory / FINAL} written at "
            f"{final['written_at']}")
    if num_epochs <= final["epochs"]:
        raise RunCompleteError(f"the run in {directory} is complete ({done}): nothing to resume")
    if latest is None:
        raise RunDirectoryError(f"the run in {directory} is complete ({done}) and holds no checkpoint to go on to "
                                f"{num_epochs} epochs from; start a new run (--overwrite), or keep checkpoints "
                                "(--checkpoint-every) to extend a run later")

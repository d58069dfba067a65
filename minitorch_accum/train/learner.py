"""The Learner: training with gradient accumulation as a first-class mode.

One optimizer step per window of k micro-batches; the learning-rate scheduler and
the step-level metrics advance per optimizer step, never per micro-batch; a
partial window at the end of an epoch is stepped and normalized by what it holds
(unless asked to drop it); windows never cross epochs.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator, DynamicLossScaler, PeakMemory
from minitorch_accum.backend import get_rng_state, manual_seed, set_rng_state
from minitorch_accum.data import DataLoader
from minitorch_accum.distributed import (
    Communicator,
    DataParallel,
    LocalCommunicator,
    WindowShare,
    rank_windows,
)
from minitorch_accum.distributed.checkpoint_broadcast import gather_json, share_checkpoint
from minitorch_accum.distributed.launch import make_communicator
from minitorch_accum.distributed.parameter_sync import broadcast_parameters, parameters_agree
from minitorch_accum.distributed.zero import ZeroRedundancy, ZeroRedundancyOptimizer
from minitorch_accum.durable_files import describe_os_error, replace_file_atomically
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer, clip_grad_norm
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer
from minitorch_accum.train.memory_budget import MemoryPlan, plan_micro_batch
from minitorch_accum.train.metrics import MetricsLog
from minitorch_accum.train.progress import Progress, make_progress
from minitorch_accum.train.run_directory import RunDirectoryError, check_run_directory
from minitorch_accum.train.run_lock import RunLock
from minitorch_accum.train.run_settings import (
    SettingsMismatchError,
    compare_settings,
    describe_changes,
    rescale_k,
)
from minitorch_accum.train.step import Classifier, TrainOutput
from minitorch_accum.train.stop_request import StopRequest, TrainingInterrupted

__all__ = ["DistributedConfig", "History", "Learner", "LearnerConfig"]


@dataclass
class DistributedConfig:
    """Data parallelism, as LearnerBuilder.distributed(...) sets it."""

    communicator: str | Communicator = "auto"
    zero: bool = False
    bucket_bytes: int = 25 << 20
    first_bucket_bytes: int = 1 << 20
    check_every: int = 50
    overlap: bool = False


@dataclass
class LearnerConfig:
    """What LearnerBuilder collected (see its methods for the meaning of each field)."""

    directory: Path
    num_epochs: int = 1
    grads_accumulation: int = 1
    effective_batch: int | None = None
    accumulation_schedule: dict[int, int] | None = None
    memory_budget: int | None = None
    reduction: str = "items"
    fusion: str = "gemm"
    accum_dtype: str = "float32"
    compensated: bool = False
    mixed_precision: str | None = None
    clip_grad_norm: float | None = None
    lr_scheduler: LRScheduler | None = None
    metrics: tuple[str, ...] = ("loss", "accuracy", "items_per_second", "grad_norm", "lr", "peak_memory")
    checkpoint_every_steps: int | None = None
    checkpoint_every_micro_batches: int | None = None
    checkpoint_keep: int = 2
    devices: tuple[str, ...] = ("cpu",)
    seed: int | None = None
    progress: str = "auto"
    drop_last_window: bool = False
    distributed: DistributedConfig | None = None
    run_config: dict[str, Any] | None = None
    allow_config_change: bool = False


@dataclass
class History:
    """Every metrics line of the run, split by kind."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    valid: list[dict[str, Any]] = field(default_factory=list)
    memory_plan: MemoryPlan | None = None
    #: the data-parallel rank that kept this history (every rank sees the global figures; rank 0 logs them)
    rank: int = 0

    @property
    def final_loss(self) -> float | None:
        return self.steps[-1]["loss"] if self.steps else None


class _Window:
    """Sums over the micro-batches of the current window, for its metrics line.

    Memory: the largest peak of its micro-batches, measured by PeakMemory around each one's
    forward and backward: ``array_peak`` the arrays alone (the activation memory: saved
    activations and temporaries; None where arrays cannot be told apart), ``peak`` everything
    the allocator counted (arrays and Python objects, the graph's nodes among them)."""

    def __init__(self) -> None:
        self.loss_sum = 0.0
        self.items = 0
        self.correct: int | None = None
        self.micro = 0
        self.seconds = 0.0
        self.peak = 0
        self.array_peak: int | None = 0

    def add(self, out: TrainOutput, seconds: float, probe: PeakMemory) -> None:
        loss = float(out.loss.item())
        self.loss_sum += loss * out.num_items if out.reduction == "mean" else loss
        self.items += out.num_items
        if out.correct is not None:
            self.correct = (self.correct or 0) + out.correct
        self.micro += 1
        self.seconds += seconds
        self.peak = max(self.peak, probe.peak_bytes)
        arrays = probe.array_peak_bytes
        self.array_peak = None if arrays is None or self.array_peak is None else max(self.array_peak, arrays)

    def state(self) -> dict[str, Any]:
        return dict(vars(self))

    def load(self, state: dict[str, Any]) -> None:
        vars(self).update(state)


class Learner:
    """Trains a step model (``train_step``/``valid_step``; a plain Module is wrapped in a
    Classifier) with an optimizer, as configured by LearnerBuilder.

    Data-parallel (``LearnerBuilder.distributed``): every rank runs this same code on its
    share of each window (``rank_windows``); the window is summed over the ranks once,
    when it closes; rank 0 alone logs, shows progress and writes files."""

    def __init__(self, model: Module, optimizer: Optimizer, config: LearnerConfig) -> None:
        self.step_model = model if hasattr(model, "train_step") else Classifier(model)
        self.model = model
        self.optimizer = optimizer
        self.config = config
        self.directory = Path(config.directory)
        # always there: periodic saves only when asked for, but an interrupted run always saves
        self.checkpointer = FileCheckpointer(self.directory / "checkpoints", keep=config.checkpoint_keep)
        if len(config.devices) != 1:
            raise ValueError(f"training on {len(config.devices)} devices is not supported yet; "
                             "pass exactly one device")
        self.device = config.devices[0]
        self.step_model.to(device=self.device)
        if config.mixed_precision is not None:
            self.step_model.to(dtype={"bf16": "bfloat16", "fp16": "float16"}[config.mixed_precision])
        self.step_model.loss_reduction = "mean" if config.reduction == "mean" else "sum"
        self.comm: Communicator = LocalCommunicator()
        self.data_parallel: DataParallel | None = None
        if config.distributed is not None:
            self._check_distributed(config)
            self.comm = make_communicator(config.distributed.communicator)
            reducer = ZeroRedundancy if config.distributed.zero else DataParallel
            self.data_parallel = reducer(self.comm, config.distributed.bucket_bytes,
                                         config.distributed.first_bucket_bytes, config.distributed.overlap)
        self.rank, self.world_size = self.comm.rank, self.comm.world_size
        self.is_main = self.rank == 0
        # float16 losses hold at most 65504, so the scale starts at 2^15 rather than PyTorch's 2^16
        scaler = DynamicLossScaler(init_scale=2.0**15) if config.mixed_precision == "fp16" else None
        self.accumulator = Accumulator(self.step_model, steps=max(1, config.grads_accumulation),
                                       reduction=config.reduction, fusion=config.fusion,
                                       accum_dtype=config.accum_dtype, compensated=config.compensated,
                                       loss_scaler=scaler, reducer=self.data_parallel)
        # what steps the parameters: the optimizer, or ZeRO-1 stepping this rank's shard with it
        self.stepper: Optimizer | ZeroRedundancyOptimizer = (
            ZeroRedundancyOptimizer(optimizer, self.accumulator)
            if isinstance(self.data_parallel, ZeroRedundancy) else optimizer)
        self.history = History(rank=self.rank)
        self.step = 0
        self._window = _Window()
        self._validated = True
        self._stop = StopRequest()
        self._log: MetricsLog | None = None
        self._last_checkpoint: tuple[tuple[int, int, int] | None, Path | None] = (None, None)

    @staticmethod
    def _check_distributed(config: LearnerConfig) -> None:
        if config.fusion == "none":
            raise ValueError("data-parallel training reduces the gradient arena: use fusion 'gemm' or 'leaf'")
        if config.checkpoint_every_micro_batches:
            raise ValueError("data-parallel checkpoints are taken at window boundaries (each rank holds part of "
                             "a window): use with_file_checkpointer(every_steps=...)")
        if config.memory_budget is not None:
            raise ValueError("memory_budget plans one process's micro-batch; with data parallelism choose the "
                             "micro-batch and k per rank yourself")

    # ------------------------------------------------------------- planning
    def steps_for_epoch(self, epoch: int, loader: DataLoader) -> int:
        """k (per rank) for an epoch: the schedule, else effective_batch / (micro-batch x ranks),
        else grads_accumulation."""
        config = self.config
        if config.accumulation_schedule:
            starts = [e for e in sorted(config.accumulation_schedule) if e <= epoch]
            if not starts:
                raise ValueError(f"accumulation_schedule has no entry at or before epoch {epoch}; "
                                 "give one for epoch 0")
            return config.accumulation_schedule[starts[-1]]
        if config.effective_batch is not None:
            per_window = loader.batch_size * self.world_size
            ranks = f" x {self.world_size} ranks" if self.world_size > 1 else ""
            if per_window > config.effective_batch:
                raise ValueError(f"the micro-batch of {loader.batch_size} items{ranks} is larger than the effective "
                                 f"batch of {config.effective_batch}")
            if config.effective_batch % per_window:
                raise ValueError(f"effective batch {config.effective_batch} is not a multiple of the "
                                 f"micro-batch {loader.batch_size}{ranks}")
            return config.effective_batch // per_window
        return config.grads_accumulation

    def _windows(self, loader: DataLoader, k: int, start: int = 0) -> list[WindowShare]:
        return rank_windows(len(loader), k, self.world_size, self.rank, start, self.config.drop_last_window)

    def _plan_memory(self, loader: DataLoader) -> DataLoader:
        config = self.config
        effective = config.effective_batch or loader.batch_size * config.grads_accumulation
        dataset = loader.dataset
        device = self.accumulator.device()

        # the trial micro-batches write into the learner's own arena: the window is empty
        # before training, and zero() makes the next write copy over them
        acc = self.accumulator

        def measure(items: int) -> int:
            batch = dataset.get_batch(np.arange(min(items, len(dataset))))
            with PeakMemory(device) as peak:
                out = self.step_model.train_step(batch)
                acc.backward(out.loss, out.num_items)
            acc.zero()
            return peak.peak_bytes

        params = self.step_model.parameters()
        param_bytes = sum(int(p.data.nbytes) for p in params)
        # float32 optimizer state: SGD keeps a momentum buffer (if any), Adam(W) two moments
        state_slots = (1 if getattr(self.optimizer, "momentum", 0) else 0) \
            if type(self.optimizer).__name__ == "SGD" else 2
        persistent = param_bytes + acc.store.nbytes + state_slots * sum(p.size * 4 for p in params)
        plan = plan_micro_batch(config.memory_budget, effective, persistent, measure)
        self.history.memory_plan = plan
        config.grads_accumulation = plan.steps
        config.effective_batch = None
        return loader.with_batch_size(plan.micro_batch)

    # ------------------------------------------------------------------ fit
    def fit(self, train_loader: DataLoader, valid_loader: DataLoader | None = None, resume: bool = False,
            overwrite: bool = False) -> tuple[Module, History]:
        """Train for ``num_epochs``; returns (model, history).

        ``resume=True`` restores the latest intact checkpoint in the directory and goes on from
        it; a new run into a directory that already holds one is refused unless ``overwrite``
        (which removes only what this library wrote there). One run at a time holds the
        directory's lock. Ctrl-C or SIGTERM finishes the micro-batch (data-parallel: the
        window), saves a checkpoint and raises TrainingInterrupted (a KeyboardInterrupt)."""
        with contextlib.ExitStack() as hold:
            failure: Exception | None = None
            if self.is_main:  # rank 0 alone owns the directory
                try:
                    hold.enter_context(RunLock(self.directory))
                    check_run_directory(self.directory, resume=resume, overwrite=overwrite)
                except (RunDirectoryError, CheckpointError, OSError) as error:
                    failure = error
            if self.comm.agree(failure is not None):  # every rank stops, none waits in a collective
                raise failure if failure is not None else RunDirectoryError(
                    f"rank 0 could not start the run in {self.directory} (see its message)")
            return self._fit(train_loader, valid_loader, resume)

    def _fit(self, train_loader: DataLoader, valid_loader: DataLoader | None, resume: bool) -> tuple[Module, History]:
        config = self.config
        self._log = log = MetricsLog(self.directory / "metrics.jsonl") if self.is_main else None
        if config.memory_budget is not None:
            train_loader = self._plan_memory(train_loader)
        progress = make_progress(config.progress if self.is_main else "none", metrics=config.metrics)
        self._settings = self.settings(train_loader)
        notes: list[str] = []
        start_epoch, start_batch = 0, 0
        if resume:
            start_epoch, start_batch = self._restore(train_loader, progress, notes)
            if log is not None:
                torn = log.truncate_after(self.step)
                if torn is not None:
                    notes.append(torn)
                self.history.steps = [r for r in log.records if r.get("kind") == "train"]
                self.history.valid = [r for r in log.records if r.get("kind") == "valid"]
        else:
            if log is not None:
                log.reset()
            if config.seed is not None:
                manual_seed(config.seed + self.rank)  # ranks draw their own dropout masks
            broadcast_parameters(self.step_model, self.comm)
        total = sum(len(self._windows(train_loader, self.steps_for_epoch(e, train_loader)))
                    for e in range(config.num_epochs))
        where = f", {self.world_size} ranks" if self.world_size > 1 else ""
        progress.start(total, f"training ({config.reduction}, fusion={config.fusion}{where})")
        for note in notes:
            progress.message(note)
        self._position = (start_epoch, start_batch)
        try:
            with self._stop.installed():
                if resume and not self._validated and valid_loader is not None:
                    self._validate(start_epoch - 1, valid_loader, log, progress)  # the kill came before it
                for epoch in range(start_epoch, config.num_epochs):
                    self._train_epoch(epoch, train_loader, start_batch if epoch == start_epoch else 0, log,
                                      valid_loader is not None, progress)
                    if valid_loader is not None:
                        self._validate(epoch, valid_loader, log, progress)
                        if self._deferred_checkpoint is not None:
                            self._save_checkpoint(*self._deferred_checkpoint)
        finally:
            progress.stop()
        if self.is_main:
            self._save_final()
        return self.model, self.history

    def _train_epoch(self, epoch: int, loader: DataLoader, start_batch: int, log: MetricsLog | None,
                     validates: bool, progress: Progress) -> None:
        config = self.config
        acc = self.accumulator
        k = self.steps_for_epoch(epoch, loader)
        if acc.micro_step == 0:
            acc.set_steps(k)
        self._deferred_checkpoint: tuple[int, int] | None = None
        # a checkpoint taken mid-window (one process) resumes inside that window
        windows = self._windows(loader, k, start=start_batch - acc.micro_step)
        for window in windows:
            for index in window.batches:
                if index < start_batch:
                    continue  # restored with the window
                self._position = (epoch, index)
                self._micro_batch(loader.batch(epoch, index), closes_window=index == window.batches[-1])
                progress.micro_batch(self.step, acc.micro_step, k)
                self._position = (epoch, index + 1)
                if self.world_size == 1 and index + 1 < window.stop:
                    every = config.checkpoint_every_micro_batches
                    if every and (index + 1) % every == 0:
                        self._save_checkpoint(epoch, index + 1)
                    if self._stop.signal is not None:
                        self._interrupt(epoch, index + 1, progress)
            self._position = (epoch, window.stop)
            if self.data_parallel is not None:
                self.data_parallel.stop_requested = self._stop.signal is not None
            self._optimizer_step(epoch, log, progress, ends_epoch=window is windows[-1] and validates)
            if self._stop.signal is not None or (self.data_parallel is not None and self.data_parallel.stop_agreed):
                self._interrupt(epoch, window.stop, progress)

    def _micro_batch(self, batch: Any, closes_window: bool) -> None:
        self.step_model.train()
        start = time.perf_counter()
        with PeakMemory(self.accumulator.device()) as probe:
            out = self.step_model.train_step(batch)
            self._check_output(out)
            self.accumulator.backward(out.loss, out.num_items, closes_window=closes_window)
        self._window.add(out, time.perf_counter() - start, probe)

    def _interrupt(self, epoch: int, next_batch: int, progress: Progress) -> None:
        saved_at, path = self._last_checkpoint
        if saved_at != (self.step, epoch, next_batch):  # not saved here already (a periodic checkpoint)
            path = self._save_checkpoint(epoch, next_batch)
        signum = self._stop.signal or 2  # another rank's signal stops this one too
        progress.message(f"interrupted: saved {path}; resume with fit(..., resume=True) or maccum train --resume")
        raise TrainingInterrupted(signum, path)

    def _check_output(self, out: Any) -> None:
        if not isinstance(out, TrainOutput):
            raise TypeError(f"train_step must return a TrainOutput, got {type(out).__name__}")
        expected = "mean" if self.config.reduction == "mean" else "sum"
        if out.reduction != expected:
            raise ValueError(f"reduction={self.config.reduction!r} needs train_step to return a {expected} loss; "
                             f"it returned a {out.reduction} loss")

    def _optimizer_step(self, epoch: int, log: MetricsLog | None, progress: Progress, ends_epoch: bool) -> None:
        config = self.config
        acc = self.accumulator
        window = self._window
        start = time.perf_counter()
        skipped = acc.found_nonfinite()  # data-parallel: the window is summed over the ranks here
        lr = self.optimizer.lr
        grad_norm = None
        if not skipped:
            if config.lr_scheduler is not None:
                lr = config.lr_scheduler.step()
            grad_norm = clip_grad_norm(acc, config.clip_grad_norm) if config.clip_grad_norm else acc.grad_norm()
            self.stepper.step(self.step_model, acc, lr=lr)
        micro = acc.micro_step
        acc.zero()
        step_seconds = time.perf_counter() - start
        self.step += 1
        items, loss_sum, correct = window.items, window.loss_sum, window.correct
        if self.world_size > 1:
            # a rank with no micro-batch in a short last window has nothing to count, not "no accuracy"
            counted = window.correct is not None or window.micro == 0
            totals = self.comm.allreduce_scalars([micro, items, loss_sum, correct or 0, counted], np.float64)
            micro, items, loss_sum = int(totals[0]), int(totals[1]), float(totals[2])
            correct = int(totals[3]) if totals[4] == self.world_size else None
            if config.distributed is not None and self.step % config.distributed.check_every == 0:
                parameters_agree(self.step_model, self.comm, self.step)
        seconds = window.seconds + step_seconds
        record = {
            "kind": "train", "epoch": epoch, "step": self.step, "micro_batches": micro, "items": items,
            "loss": loss_sum / items if items else float("nan"),
            "accuracy": None if correct is None or not items else correct / items,
            "lr": lr, "grad_norm": None if grad_norm is None or not math.isfinite(grad_norm) else grad_norm,
            "peak_array_bytes": window.array_peak, "peak_activation_bytes": window.peak,
            "accumulation_seconds": window.seconds,
            "step_seconds": step_seconds, "items_per_second": items / seconds if seconds > 0 else 0.0,
            "skipped": skipped,
        }
        if log is not None:
            log.write(record)
        self.history.steps.append(record)
        progress.step(record)
        self._window = _Window()
        if ends_epoch:
            self._validated = False
        if config.checkpoint_every_steps and self.step % config.checkpoint_every_steps == 0:
            if ends_epoch:  # after validation, so the checkpoint can say it ran
                self._deferred_checkpoint = self._position
            else:
                self._save_checkpoint(*self._position)

    def _validate(self, epoch: int, loader: DataLoader, log: MetricsLog | None, progress: Progress) -> None:
        record = self.evaluate(loader)
        record.update(kind="valid", epoch=epoch, step=self.step)
        if log is not None:
            log.write(record)
        self.history.valid.append(record)
        self._validated = True
        progress.message(f"epoch {epoch}: valid loss {record['loss']:.4f}"
                         + (f", accuracy {record['accuracy']:.3f}" if record.get("accuracy") is not None else ""))

    def evaluate(self, loader: DataLoader) -> dict[str, Any]:
        """Loss per item (and accuracy) over a whole loader, in evaluation mode (data-parallel:
        each rank takes every R-th batch and the sums are added over the ranks)."""
        self.step_model.eval()
        loss_sum, items, correct = 0.0, 0, 0
        has_correct = True
        for index in range(self.rank, len(loader), self.world_size):
            out = self.step_model.valid_step(loader.batch(0, index))
            loss_sum += out.loss_sum
            items += out.num_items
            if out.correct is None:
                has_correct = False
            else:
                correct += out.correct
        self.step_model.train()
        if self.world_size > 1:
            totals = self.comm.allreduce_scalars([loss_sum, items, correct, not has_correct], np.float64)
            loss_sum, items, correct, has_correct = float(totals[0]), int(totals[1]), int(totals[2]), totals[3] == 0
        return {"loss": loss_sum / items if items else float("nan"), "items": items,
                "accuracy": correct / items if has_correct and items else None}

    # ---------------------------------------------------------- checkpoints
    def settings(self, loader: DataLoader) -> dict[str, Any]:
        """What this run is made of (compared with a checkpoint's on resume)."""
        config = self.config
        return {
            "micro_batch": loader.batch_size,
            "window_micro_batches": None if config.effective_batch else config.grads_accumulation * self.world_size,
            "effective_batch": config.effective_batch,
            "accumulation_schedule": None if config.accumulation_schedule is None
            else {str(e): k * self.world_size for e, k in sorted(config.accumulation_schedule.items())},
            "reduction": config.reduction, "fusion": config.fusion, "accum_dtype": config.accum_dtype,
            "compensated": config.compensated, "mixed_precision": config.mixed_precision,
            "clip_grad_norm": config.clip_grad_norm, "drop_last_window": config.drop_last_window,
            "optimizer": {"type": type(self.optimizer).__name__, **self.optimizer.hyperparameters()},
            "run": config.run_config or {},
        }

    def _save_checkpoint(self, epoch: int, next_batch: int) -> Path | None:
        """Rank 0 writes; every rank takes part (its RNG state is gathered)."""
        rng = get_rng_state()
        rng_ranks = gather_json(self.comm, rng) if self.world_size > 1 else None
        acc_state = self.accumulator.state_dict()
        if self.stepper is not self.optimizer:
            opt_state = self.stepper.state_dict()  # ZeRO-1 gathers the shards: every rank takes part
        if not self.is_main:
            return None
        if self.stepper is self.optimizer:
            opt_state = self.optimizer.state_dict()
        opt_arrays = {f"{name}/{slot}": value for name, slots in opt_state["state"].items()
                      for slot, value in slots.items() if isinstance(value, np.ndarray)}
        opt_scalars = {name: {slot: value for slot, value in slots.items() if not isinstance(value, np.ndarray)}
                       for name, slots in opt_state["state"].items()}
        state = {
            "epoch": epoch, "next_batch": next_batch, "step": self.step,
            "world_size": self.world_size, "validated": self._validated,
            "rng": rng, "rng_ranks": rng_ranks,
            "scheduler": None if self.config.lr_scheduler is None else self.config.lr_scheduler.state_dict(),
            "optimizer": {"step_count": opt_state["step_count"], "skipped_steps": opt_state["skipped_steps"],
                          "hyperparameters": opt_state["hyperparameters"], "scalars": opt_scalars},
            "accumulator": acc_state["meta"],
            "window": self._window.state(),
            "settings": self._settings,
            "config": {"reduction": self.config.reduction, "fusion": self.config.fusion,
                       "num_epochs": self.config.num_epochs},
        }
        arrays = {"model": self.step_model.to_record(), "optimizer": opt_arrays,
                  "accumulator": acc_state["arrays"]}
        if self._log is not None:
            self._log.sync()  # the log holds every step the checkpoint covers
        path = self.checkpointer.save(f"step{self.step:07d}-epoch{epoch:04d}-batch{next_batch:06d}", arrays, state)
        self._last_checkpoint = ((self.step, epoch, next_batch), path)
        return path

    def _adopt_settings(self, state: dict[str, Any], loader: DataLoader, progress: Progress) -> None:
        """Refuse to resume a run made with other settings (unless allowed, then say what changes);
        on another number of ranks, re-derive k per rank so the window keeps its size."""
        config = self.config
        saved = state.get("settings")
        if saved is None:  # a checkpoint of an earlier version: only these were recorded
            saved = {**self._settings, **{k: v for k, v in state["config"].items() if k in ("reduction", "fusion")}}
        saved_world = int(state.get("world_size", 1))
        if saved_world != self.world_size:
            if state["accumulator"]["micro_step"]:
                raise SettingsMismatchError(
                    f"the checkpoint was taken mid-window by {saved_world} process(es); resume it with "
                    f"{saved_world}, or from a checkpoint taken at a window boundary")
            before = self._settings["window_micro_batches"]
            if before is not None and before != saved["window_micro_batches"] and \
                    config.grads_accumulation * saved_world == saved["window_micro_batches"]:
                k = rescale_k(config.grads_accumulation, saved_world, self.world_size)
                progress.message(
                    f"resuming a run of {saved_world} rank(s) on {self.world_size}: k per rank "
                    f"{config.grads_accumulation} -> {k}, so each window keeps {saved['window_micro_batches']} "
                    f"micro-batches of {loader.batch_size} items")
                config.grads_accumulation = k
            if config.accumulation_schedule is not None and \
                    self._settings["accumulation_schedule"] != saved["accumulation_schedule"]:
                config.accumulation_schedule = {
                    int(e): rescale_k(int(total) // saved_world, saved_world, self.world_size)
                    for e, total in saved["accumulation_schedule"].items()}
            self._settings = self.settings(loader)
        changes = compare_settings(saved, self._settings)
        if changes and not config.allow_config_change:
            raise SettingsMismatchError(
                f"resume: the checkpoint in {self.checkpointer.directory} was written with other settings: "
                f"{describe_changes(changes)}; resume with the same settings, or allow the change "
                "(allow_config_change / --allow-config-change)")
        if changes:
            progress.message(f"resuming with changed settings: {describe_changes(changes)}")

    def _restore(self, loader: DataLoader, progress: Progress, notes: list[str]) -> tuple[int, int]:
        loaded = None
        if self.is_main:
            checkpoint = self.checkpointer.load_checkpoint(require=("model", "optimizer", "accumulator"))
            if checkpoint.message is not None:
                notes.append(checkpoint.message)  # latest was damaged: an older intact one is used
            loaded = (checkpoint.arrays, checkpoint.state)
            self._restored_from = checkpoint.path
        arrays, state = share_checkpoint(self.comm, loaded) if self.world_size > 1 else loaded
        self._adopt_settings(state, loader, progress)
        self.step_model.load_record(arrays["model"])
        opt = state["optimizer"]
        slots: dict[str, dict[str, Any]] = {name: dict(values) for name, values in opt["scalars"].items()}
        for key, value in arrays.get("optimizer", {}).items():
            name, slot = key.rsplit("/", 1)
            slots.setdefault(name, {})[slot] = value
        # an allowed change of settings keeps this run's hyperparameters (the message said which)
        hyperparameters = self.optimizer.hyperparameters() if self.config.allow_config_change \
            else opt["hyperparameters"]
        self.stepper.load_state_dict({"step_count": opt["step_count"], "skipped_steps": opt["skipped_steps"],
                                      "hyperparameters": hyperparameters, "state": slots}, model=self.step_model)
        self.accumulator.load_state_dict({"meta": state["accumulator"], "arrays": arrays.get("accumulator", {})})
        if self.config.lr_scheduler is not None and state["scheduler"] is not None:
            self.config.lr_scheduler.load_state_dict(state["scheduler"])
        if int(state.get("world_size", 1)) == self.world_size:  # else each rank keeps the stream it was seeded with
            set_rng_state(state["rng"] if self.world_size == 1 else state["rng_ranks"][self.rank])
        self._window.load(state["window"])
        self.step = int(state["step"])
        self._validated = bool(state.get("validated", True))
        epoch, next_batch = int(state["epoch"]), int(state["next_batch"])
        if next_batch >= len(loader):
            epoch, next_batch = epoch + 1, 0
        notes.insert(0, f"resumed from step {self.step} (epoch {epoch}, micro-batch {next_batch})"
                        + (f" of {self._restored_from}" if self.is_main else ""))
        return epoch, next_batch

    def _save_final(self) -> None:
        from safetensors.numpy import save

        path = self.directory / "final.safetensors"
        try:
            replace_file_atomically(path, save(self.model.to_record()),
                                    path.with_name(f".final.safetensors.tmp-{os.getpid()}"))
        except OSError as error:
            raise RunDirectoryError(f"cannot write {path}: {describe_os_error(error)}") from error

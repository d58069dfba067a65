"""The Learner: training with gradient accumulation as a first-class mode.

One optimizer step per window of k micro-batches; the learning-rate scheduler and
the step-level metrics advance per optimizer step, never per micro-batch; a
partial window at the end of an epoch is stepped and normalized by what it holds
(unless asked to drop it); windows never cross epochs.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator, DynamicLossScaler, PeakMemory
from minitorch_accum.backend import get_rng_state, manual_seed, set_rng_state
from minitorch_accum.data import DataLoader
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer, clip_grad_norm
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer
from minitorch_accum.train.memory_budget import MemoryPlan, plan_micro_batch
from minitorch_accum.train.metrics import MetricsLog
from minitorch_accum.train.progress import make_progress
from minitorch_accum.train.step import Classifier, TrainOutput

__all__ = ["History", "Learner", "LearnerConfig"]


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


@dataclass
class History:
    """Every metrics line of the run, split by kind."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    valid: list[dict[str, Any]] = field(default_factory=list)
    memory_plan: MemoryPlan | None = None

    @property
    def final_loss(self) -> float | None:
        return self.steps[-1]["loss"] if self.steps else None


class _Window:
    """Sums over the micro-batches of the current window, for its metrics line."""

    def __init__(self) -> None:
        self.loss_sum = 0.0
        self.items = 0
        self.correct: int | None = None
        self.micro = 0
        self.seconds = 0.0
        self.peak = 0

    def add(self, out: TrainOutput, seconds: float, peak: int) -> None:
        loss = float(out.loss.item())
        self.loss_sum += loss * out.num_items if out.reduction == "mean" else loss
        self.items += out.num_items
        if out.correct is not None:
            self.correct = (self.correct or 0) + out.correct
        self.micro += 1
        self.seconds += seconds
        self.peak = max(self.peak, peak)

    def state(self) -> dict[str, Any]:
        return dict(vars(self))

    def load(self, state: dict[str, Any]) -> None:
        vars(self).update(state)


class _StopRequest:
    """Ctrl-C or SIGTERM during fit: finish the current micro-batch, checkpoint, then stop.

    A second Ctrl-C stops at once (without a checkpoint, since the window may then be
    half-written)."""

    def __init__(self) -> None:
        self.signal: int | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self.signal is not None and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self.signal = signum

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


class Learner:
    """Trains a step model (``train_step``/``valid_step``; a plain Module is wrapped in a
    Classifier) with an optimizer, as configured by LearnerBuilder."""

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
        # float16 losses hold at most 65504, so the scale starts at 2^15 rather than PyTorch's 2^16
        scaler = DynamicLossScaler(init_scale=2.0**15) if config.mixed_precision == "fp16" else None
        self.accumulator = Accumulator(self.step_model, steps=max(1, config.grads_accumulation),
                                       reduction=config.reduction, fusion=config.fusion,
                                       accum_dtype=config.accum_dtype, compensated=config.compensated,
                                       loss_scaler=scaler)
        self.history = History()
        self.step = 0
        self._window = _Window()

    # ------------------------------------------------------------- planning
    def steps_for_epoch(self, epoch: int, loader: DataLoader) -> int:
        """k for an epoch: the schedule, else effective_batch / micro-batch, else grads_accumulation."""
        config = self.config
        if config.accumulation_schedule:
            starts = [e for e in sorted(config.accumulation_schedule) if e <= epoch]
            if not starts:
                raise ValueError(f"accumulation_schedule has no entry at or before epoch {epoch}; "
                                 "give one for epoch 0")
            return config.accumulation_schedule[starts[-1]]
        if config.effective_batch is not None:
            if loader.batch_size > config.effective_batch:
                raise ValueError(f"the micro-batch of {loader.batch_size} items is larger than the effective "
                                 f"batch of {config.effective_batch}")
            if config.effective_batch % loader.batch_size:
                raise ValueError(f"effective batch {config.effective_batch} is not a multiple of the "
                                 f"micro-batch {loader.batch_size}")
            return config.effective_batch // loader.batch_size
        return config.grads_accumulation

    def _windows_in_epoch(self, loader: DataLoader, k: int) -> int:
        full, rest = divmod(len(loader), k)
        return full + (1 if rest and not self.config.drop_last_window else 0)

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
    def fit(self, train_loader: DataLoader, valid_loader: DataLoader | None = None,
            resume: bool = False) -> tuple[Module, History]:
        """Train for ``num_epochs``; returns (model, history). With ``resume=True`` the latest
        checkpoint in the directory is restored first and training continues from it."""
        config = self.config
        self.directory.mkdir(parents=True, exist_ok=True)
        log = MetricsLog(self.directory / "metrics.jsonl")
        if config.memory_budget is not None:
            train_loader = self._plan_memory(train_loader)
        start_epoch, start_batch = 0, 0
        if resume:
            start_epoch, start_batch = self._restore(train_loader)
            log.truncate_after(self.step)
            self.history.steps = [r for r in log.records if r.get("kind") == "train"]
            self.history.valid = [r for r in log.records if r.get("kind") == "valid"]
        else:
            log.reset()
            if config.seed is not None:
                manual_seed(config.seed)
        total = sum(self._windows_in_epoch(train_loader, self.steps_for_epoch(e, train_loader))
                    for e in range(config.num_epochs))
        progress = make_progress(config.progress, metrics=config.metrics)
        progress.start(total, f"training ({config.reduction}, fusion={config.fusion})")
        self._position = (start_epoch, start_batch)
        self._stop = _StopRequest()
        try:
            with self._stop.installed():
                for epoch in range(start_epoch, config.num_epochs):
                    self._train_epoch(epoch, train_loader, start_batch if epoch == start_epoch else 0, log,
                                      progress)
                    if valid_loader is not None:
                        record = self.evaluate(valid_loader)
                        record.update(kind="valid", epoch=epoch, step=self.step)
                        log.write(record)
                        self.history.valid.append(record)
                        progress.message(f"epoch {epoch}: valid loss {record['loss']:.4f}"
                                         + (f", accuracy {record['accuracy']:.3f}"
                                            if record.get("accuracy") is not None else ""))
        finally:
            progress.stop()
        self._save_final()
        return self.model, self.history

    def _train_epoch(self, epoch: int, loader: DataLoader, start_batch: int, log: MetricsLog,
                     progress: Any) -> None:
        config = self.config
        acc = self.accumulator
        k = self.steps_for_epoch(epoch, loader)
        if acc.micro_step == 0:
            acc.set_steps(k)
        batches_in_epoch = len(loader)
        last_window_start = (batches_in_epoch // k) * k
        partial = batches_in_epoch - last_window_start
        for index, batch in enumerate(loader.batches(epoch, start_batch), start=start_batch):
            self._position = (epoch, index)
            if config.drop_last_window and partial and index >= last_window_start:
                break
            self.step_model.train()
            start = time.perf_counter()
            with PeakMemory(acc.device()) as peak:
                out = self.step_model.train_step(batch)
                self._check_output(out)
                acc.backward(out.loss, out.num_items)
            self._window.add(out, time.perf_counter() - start, peak.peak_bytes)
            progress.micro_batch(self.step, acc.micro_step, k)
            self._position = (epoch, index + 1)
            if acc.is_boundary or index == batches_in_epoch - 1:
                self._optimizer_step(epoch, log, progress)
            elif config.checkpoint_every_micro_batches and (index + 1) % config.checkpoint_every_micro_batches == 0:
                self._save_checkpoint(epoch, index + 1)
            if self._stop.signal is not None:
                path = self._save_checkpoint(epoch, index + 1)
                progress.message(f"interrupted: saved {path}; resume with fit(..., resume=True) "
                                 "or maccum train --resume")
                raise KeyboardInterrupt
        if acc.micro_step:  # dropped partial window
            acc.zero()
            self._window = _Window()

    def _check_output(self, out: Any) -> None:
        if not isinstance(out, TrainOutput):
            raise TypeError(f"train_step must return a TrainOutput, got {type(out).__name__}")
        expected = "mean" if self.config.reduction == "mean" else "sum"
        if out.reduction != expected:
            raise ValueError(f"reduction={self.config.reduction!r} needs train_step to return a {expected} loss; "
                             f"it returned a {out.reduction} loss")

    def _optimizer_step(self, epoch: int, log: MetricsLog, progress: Any) -> None:
        config = self.config
        acc = self.accumulator
        window = self._window
        start = time.perf_counter()
        skipped = acc.found_nonfinite()
        lr = self.optimizer.lr
        grad_norm = None
        if not skipped:
            if config.lr_scheduler is not None:
                lr = config.lr_scheduler.step()
            grad_norm = clip_grad_norm(acc, config.clip_grad_norm) if config.clip_grad_norm else acc.grad_norm()
            self.optimizer.step(self.step_model, acc, lr=lr)
        micro = acc.micro_step
        acc.zero()
        step_seconds = time.perf_counter() - start
        self.step += 1
        seconds = window.seconds + step_seconds
        record = {
            "kind": "train", "epoch": epoch, "step": self.step, "micro_batches": micro, "items": window.items,
            "loss": window.loss_sum / window.items if window.items else float("nan"),
            "accuracy": None if window.correct is None or not window.items else window.correct / window.items,
            "lr": lr, "grad_norm": None if grad_norm is None or not math.isfinite(grad_norm) else grad_norm,
            "peak_activation_bytes": window.peak, "accumulation_seconds": window.seconds,
            "step_seconds": step_seconds, "items_per_second": window.items / seconds if seconds > 0 else 0.0,
            "skipped": skipped,
        }
        log.write(record)
        self.history.steps.append(record)
        progress.step(record)
        self._window = _Window()
        if config.checkpoint_every_steps and self.step % config.checkpoint_every_steps == 0:
            self._save_checkpoint(*self._position)

    def evaluate(self, loader: DataLoader) -> dict[str, Any]:
        """Loss per item (and accuracy) over a whole loader, in evaluation mode."""
        self.step_model.eval()
        loss_sum, items, correct = 0.0, 0, 0
        has_correct = True
        for batch in loader.batches(0):
            out = self.step_model.valid_step(batch)
            loss_sum += out.loss_sum
            items += out.num_items
            if out.correct is None:
                has_correct = False
            else:
                correct += out.correct
        self.step_model.train()
        return {"loss": loss_sum / items if items else float("nan"), "items": items,
                "accuracy": correct / items if has_correct and items else None}

    # ---------------------------------------------------------- checkpoints
    def _save_checkpoint(self, epoch: int, next_batch: int) -> Path:
        acc_state = self.accumulator.state_dict()
        opt_state = self.optimizer.state_dict()
        opt_arrays = {f"{name}/{slot}": value for name, slots in opt_state["state"].items()
                      for slot, value in slots.items() if isinstance(value, np.ndarray)}
        opt_scalars = {name: {slot: value for slot, value in slots.items() if not isinstance(value, np.ndarray)}
                       for name, slots in opt_state["state"].items()}
        state = {
            "epoch": epoch, "next_batch": next_batch, "step": self.step,
            "rng": get_rng_state(),
            "scheduler": None if self.config.lr_scheduler is None else self.config.lr_scheduler.state_dict(),
            "optimizer": {"step_count": opt_state["step_count"], "skipped_steps": opt_state["skipped_steps"],
                          "hyperparameters": opt_state["hyperparameters"], "scalars": opt_scalars},
            "accumulator": acc_state["meta"],
            "window": self._window.state(),
            "config": {"reduction": self.config.reduction, "fusion": self.config.fusion,
                       "num_epochs": self.config.num_epochs},
        }
        arrays = {"model": self.step_model.to_record(), "optimizer": opt_arrays,
                  "accumulator": acc_state["arrays"]}
        return self.checkpointer.save(f"step{self.step:07d}-epoch{epoch:04d}-batch{next_batch:06d}", arrays, state)

    def _restore(self, loader: DataLoader) -> tuple[int, int]:
        arrays, state = self.checkpointer.load()
        saved = state["config"]
        if saved["reduction"] != self.config.reduction or saved["fusion"] != self.config.fusion:
            raise CheckpointError(f"checkpoint was written with reduction={saved['reduction']!r}, "
                                  f"fusion={saved['fusion']!r}; this run uses reduction={self.config.reduction!r}, "
                                  f"fusion={self.config.fusion!r}")
        self.step_model.load_record(arrays["model"])
        opt = state["optimizer"]
        slots: dict[str, dict[str, Any]] = {name: dict(values) for name, values in opt["scalars"].items()}
        for key, value in arrays.get("optimizer", {}).items():
            name, slot = key.rsplit("/", 1)
            slots.setdefault(name, {})[slot] = value
        self.optimizer.load_state_dict({"step_count": opt["step_count"], "skipped_steps": opt["skipped_steps"],
                                        "hyperparameters": opt["hyperparameters"], "state": slots},
                                       model=self.step_model)
        self.accumulator.load_state_dict({"meta": state["accumulator"], "arrays": arrays.get("accumulator", {})})
        if self.config.lr_scheduler is not None and state["scheduler"] is not None:
            self.config.lr_scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        self._window.load(state["window"])
        self.step = int(state["step"])
        epoch, next_batch = int(state["epoch"]), int(state["next_batch"])
        if next_batch >= len(loader):
            epoch, next_batch = epoch + 1, 0
        return epoch, next_batch

    def _save_final(self) -> None:
        from safetensors.numpy import save_file

        path = self.directory / "final.safetensors"
        tmp = path.with_suffix(".safetensors.tmp")
        save_file(self.model.to_record(), str(tmp))
        tmp.replace(path)

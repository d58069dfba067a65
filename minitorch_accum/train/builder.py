"""LearnerBuilder: Burn's builder, with accumulation settings that read as sentences.

    learner = (LearnerBuilder("runs/demo")
               .num_epochs(5)
               .grads_accumulation(8)
               .reduction("items")
               .with_file_checkpointer(every_steps=50)
               .build(model, optimizer))
    model, history = learner.fit(train_loader, valid_loader)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from minitorch_accum.accum import FUSIONS, REDUCTIONS
from minitorch_accum.backend import parse_device
from minitorch_accum.distributed import Communicator
from minitorch_accum.distributed.launch import COMMUNICATORS
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.train.learner import DistributedConfig, Learner, LearnerConfig
from minitorch_accum.train.metrics import METRICS
from minitorch_accum.train.progress import PROGRESS_MODES

__all__ = ["LearnerBuilder"]

_MIXED = ("bf16", "fp16")


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return value


class LearnerBuilder:
    """Collects the training configuration; ``build(model, optimizer)`` returns a Learner."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self._config = LearnerConfig(directory=Path(directory))

    def num_epochs(self, n: int) -> LearnerBuilder:
        self._config.num_epochs = _positive_int("num_epochs", n)
        return self

    def grads_accumulation(self, k: int) -> LearnerBuilder:
        """k micro-batches per optimizer step."""
        self._config.grads_accumulation = _positive_int("grads_accumulation (k)", k)
        return self

    def effective_batch(self, n: int) -> LearnerBuilder:
        """Items per optimizer step; k is derived from the loader's micro-batch size."""
        self._config.effective_batch = _positive_int("effective_batch", n)
        return self

    def accumulation_schedule(self, schedule: dict[int, int]) -> LearnerBuilder:
        """k by epoch, as Lightning's GradientAccumulationScheduler: ``{0: 8, 4: 4}`` uses
        k=8 from epoch 0 and k=4 from epoch 4."""
        if not schedule or 0 not in schedule:
            raise ValueError("accumulation_schedule needs an entry for epoch 0")
        for epoch, k in schedule.items():
            if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
                raise ValueError(f"accumulation_schedule: epochs must be non-negative ints, got {epoch!r}")
            _positive_int(f"accumulation_schedule[{epoch}] (k)", k)
        self._config.accumulation_schedule = dict(schedule)
        return self

    def memory_budget(self, nbytes: int) -> LearnerBuilder:
        """Choose the micro-batch (and k) that fits ``nbytes`` by measuring trial micro-batches."""
        self._config.memory_budget = _positive_int("memory_budget (bytes)", nbytes)
        return self

    def reduction(self, reduction: str) -> LearnerBuilder:
        """``"items"`` (default, exact for micro-batches of unequal size), ``"mean"`` or ``"sum"``."""
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
        self._config.reduction = reduction
        return self

    def fusion(self, fusion: str) -> LearnerBuilder:
        """``"gemm"`` (default), ``"leaf"`` or ``"none"`` (Burn's container path)."""
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        self._config.fusion = fusion
        return self

    def accum_dtype(self, dtype: str) -> LearnerBuilder:
        if dtype not in ("float32", "float64"):
            raise ValueError(f"accum_dtype must be 'float32' or 'float64', got {dtype!r}")
        self._config.accum_dtype = dtype
        return self

    def compensated(self, enabled: bool = True) -> LearnerBuilder:
        """Neumaier-compensated accumulation (a second arena for the lost low-order bits)."""
        self._config.compensated = bool(enabled)
        return self

    def mixed_precision(self, mode: str | None) -> LearnerBuilder:
        """``"bf16"`` or ``"fp16"``: 16-bit parameters and activations, float32 gradient arena and
        optimizer master weights; ``"fp16"`` adds dynamic loss scaling. None turns it off."""
        if mode is not None and mode not in _MIXED:
            raise ValueError(f"mixed_precision must be one of {', '.join(_MIXED)} or None, got {mode!r}")
        self._config.mixed_precision = mode
        return self

    def clip_grad_norm(self, max_norm: float) -> LearnerBuilder:
        if not max_norm > 0:
            raise ValueError(f"clip_grad_norm must be positive, got {max_norm!r}")
        self._config.clip_grad_norm = float(max_norm)
        return self

    def lr_scheduler(self, scheduler: LRScheduler) -> LearnerBuilder:
        """A scheduler from ``optim.lr_scheduler``, advanced once per optimizer step."""
        if not isinstance(scheduler, LRScheduler):
            raise TypeError(f"lr_scheduler expects an LRScheduler, got {type(scheduler).__name__}")
        self._config.lr_scheduler = scheduler
        return self

    def metric(self, *names: str) -> LearnerBuilder:
        """Metrics to show while training (all are logged to metrics.jsonl)."""
        for name in names:
            if name not in METRICS:
                raise ValueError(f"unknown metric {name!r}: expected one of {', '.join(METRICS)}")
        self._config.metrics = tuple(dict.fromkeys(names))
        return self

    def with_file_checkpointer(self, every_steps: int | None = None, every_micro_batches: int | None = None,
                               keep: int = 2) -> LearnerBuilder:
        """Checkpoint every ``every_steps`` optimizer steps and/or every ``every_micro_batches``
        micro-batches (mid-window checkpoints resume mid-window); keep the newest ``keep``."""
        if every_steps is None and every_micro_batches is None:
            every_steps = 1
        self._config.checkpoint_every_steps = None if every_steps is None else _positive_int("every_steps",
                                                                                              every_steps)
        self._config.checkpoint_every_micro_batches = (
            None if every_micro_batches is None else _positive_int("every_micro_batches", every_micro_batches))
        self._config.checkpoint_keep = _positive_int("keep", keep)
        return self

    def devices(self, devices: list[str]) -> LearnerBuilder:
        parsed = [str(parse_device(d)) for d in devices]
        if not parsed:
            raise ValueError("devices needs at least one device")
        self._config.devices = tuple(parsed)
        return self

    def seed(self, seed: int) -> LearnerBuilder:
        """Seed the library's generator (dropout) when training starts."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        self._config.seed = seed
        return self

    def drop_last_window(self, drop: bool = True) -> LearnerBuilder:
        """Drop a partial window at the end of an epoch instead of stepping it."""
        self._config.drop_last_window = bool(drop)
        return self

    def progress(self, mode: str) -> LearnerBuilder:
        """``"rich"``, ``"plain"``, ``"none"`` or ``"auto"`` (rich on a terminal, plain otherwise)."""
        if mode not in PROGRESS_MODES:
            raise ValueError(f"progress must be one of {', '.join(PROGRESS_MODES)}, got {mode!r}")
        self._config.progress = mode
        return self

    def distributed(self, communicator: str | Communicator = "auto", *, zero: bool = False,
                    bucket_bytes: int = 25 << 20, first_bucket_bytes: int = 1 << 20,
                    check_every: int = 50, overlap: bool = False) -> LearnerBuilder:
        """Data-parallel training: each rank accumulates its share of every window and the window is
        summed over the ranks once, when it closes.

        ``communicator``: ``"auto"`` (MPI when started by ``mpiexec -n R`` with R > 1, else one
        process), ``"mpi"``, ``"nccl"``, ``"local"`` or a Communicator. k (grads_accumulation) is per
        rank: R ranks x k x b is one window of R*k*b items. ``zero``: ZeRO-1 (each rank keeps the
        optimizer state of its shard). ``bucket_bytes``/``first_bucket_bytes``: the pieces one
        collective call reduces. ``check_every``: optimizer steps between checks that every rank
        holds the same parameters. ``overlap``: start each bucket's reduction during the window's
        last backward (off by default: on the CPU it measured slower, see docs/distributed.md)."""
        if not isinstance(communicator, Communicator) and communicator not in COMMUNICATORS:
            raise ValueError(f"communicator must be one of {', '.join(COMMUNICATORS)} or a Communicator, "
                             f"got {communicator!r}")
        self._config.distributed = DistributedConfig(
            communicator, bool(zero), _positive_int("bucket_bytes", bucket_bytes),
            _positive_int("first_bucket_bytes", first_bucket_bytes), _positive_int("check_every", check_every),
            bool(overlap))
        return self

    def config(self, settings: Any) -> LearnerBuilder:
        """Record the run's own settings (a ``minitorch_accum.config.config`` dataclass or a dict of
        JSON values) in every checkpoint; a resume with different settings is refused."""
        if hasattr(settings, "to_json"):
            import json

            settings = json.loads(settings.to_json())
        if not isinstance(settings, dict):
            raise TypeError(f"config expects a @config dataclass or a dict, got {type(settings).__name__}")
        self._config.run_config = dict(settings)
        return self

    def allow_config_change(self, allow: bool = True) -> LearnerBuilder:
        """Let a resume continue with settings that differ from the checkpoint's (saying which)."""
        self._config.allow_config_change = bool(allow)
        return self

    def build(self, model: Module, optimizer: Optimizer) -> Learner:
        if not isinstance(model, Module):
            raise TypeError(f"build: model must be a Module, got {type(model).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"build: optimizer must be an Optimizer, got {type(optimizer).__name__}")
        if self._config.effective_batch is not None and self._config.accumulation_schedule is not None:
            raise ValueError("give either effective_batch or accumulation_schedule, not both")
        return Learner(model, optimizer, self._config)

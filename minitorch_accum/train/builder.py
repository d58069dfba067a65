"""LearnerBuilder: Burn's builder, with accumulation settings that read as sentences.

    learner = (LearnerBuilder("runs/demo")
               .num_epochs(5)
               .grads_accumulation(8)
               .reduction("items")
               .with_file_checkpointer(every_steps=50)
               .build(model, optimizer))
    model, history = learner.fit(train_loader, valid_loader)

Every method sets rows of the settings table (``train/settings.py``), checked there: the
names, defaults and checks of a setting are written once, for the builder and the command
line alike.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from minitorch_accum.distributed import Communicator
from minitorch_accum.distributed.launch import COMMUNICATORS
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.train.callbacks import Callback, StepEndFunction, check_callback
from minitorch_accum.train.checkpoint.record import check_json_exact
from minitorch_accum.train.learner import Learner
from minitorch_accum.train.progress import Progress
from minitorch_accum.train.setting_kinds import Integer
from minitorch_accum.train.settings import LearnerConfig, setting

__all__ = ["LearnerBuilder"]

_EVERY = Integer(1)


class LearnerBuilder:
    """Collects the training configuration; ``build(model, optimizer)`` returns a Learner."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._config = LearnerConfig(directory=Path(directory))
        self._callbacks: list[Callback] = []

    def _set(self, name: str, value: Any) -> LearnerBuilder:
        setattr(self._config, name, setting(name).check(value))
        return self

    def settings(self, values: Mapping[str, Any]) -> LearnerBuilder:
        """Set rows of the settings table by name, as the command line does: each learner row
        on the config, each task row (what the caller built the run from) recorded under run."""
        run = dict(self._config.run_config or {})
        for name, value in values.items():
            row = setting(name)
            if row.target == "learner":
                self._set(name, value)
            elif row.target == "task":
                run[name] = row.check(value)
            else:
                raise ValueError(f"{name} is not a setting of the Learner (a {row.target} setting)")
        if run:
            self._config.run_config = run
        return self

    def num_epochs(self, n: int) -> LearnerBuilder:
        return self._set("num_epochs", n)

    def grads_accumulation(self, k: int) -> LearnerBuilder:
        """k micro-batches per optimizer step."""
        return self._set("grads_accumulation", k)

    def effective_batch(self, n: int) -> LearnerBuilder:
        """Items per optimizer step; k is derived from the loader's micro-batch size."""
        return self._set("effective_batch", n)

    def accumulation_schedule(self, schedule: dict[int, int]) -> LearnerBuilder:
        """k by epoch, as Lightning's GradientAccumulationScheduler: ``{0: 8, 4: 4}`` uses
        k=8 from epoch 0 and k=4 from epoch 4."""
        return self._set("accumulation_schedule", schedule)

    def memory_budget(self, nbytes: int) -> LearnerBuilder:
        """Choose the micro-batch (and k) that fits ``nbytes`` by measuring trial micro-batches."""
        return self._set("memory_budget", nbytes)

    def reduction(self, reduction: str) -> LearnerBuilder:
        """``"items"`` (default, exact for micro-batches of unequal size), ``"mean"``, ``"mean_nominal"``
        (divide by the configured k even on a partial window: Lightning's rule) or ``"sum"``."""
        return self._set("reduction", reduction)

    def fusion(self, fusion: str) -> LearnerBuilder:
        """``"gemm"`` (default), ``"leaf"`` or ``"none"`` (Burn's container path)."""
        return self._set("fusion", fusion)

    def accum_dtype(self, dtype: str) -> LearnerBuilder:
        """The gradient arena's dtype: ``"float32"``, ``"float64"`` or ``"bfloat16"`` (half the bytes)."""
        return self._set("accum_dtype", dtype)

    def rounding(self, mode: str) -> LearnerBuilder:
        """How a bfloat16 arena rounds each sum: ``"nearest"`` or ``"stochastic"`` (keyed by the seed)."""
        return self._set("rounding", mode)

    def compensated(self, enabled: bool = True) -> LearnerBuilder:
        """Neumaier-compensated accumulation (a second arena for the lost low-order bits)."""
        return self._set("compensated", enabled)

    def mixed_precision(self, mode: str | None) -> LearnerBuilder:
        """``"bf16"`` or ``"fp16"``: 16-bit parameters and activations, float32 gradient arena and
        optimizer master weights; ``"fp16"`` adds dynamic loss scaling. None turns it off."""
        return self._set("mixed_precision", mode)

    def clip_grad_norm(self, max_norm: float) -> LearnerBuilder:
        """Clip the window's gradient (not each micro-batch's) to this global norm."""
        return self._set("clip_grad_norm", max_norm)

    def lr_scheduler(self, scheduler: LRScheduler) -> LearnerBuilder:
        """A scheduler from ``optim.lr_scheduler``, advanced once per optimizer step."""
        if scheduler is None:
            raise TypeError("lr_scheduler expects an LRScheduler, got NoneType")
        return self._set("lr_scheduler", scheduler)

    def metric(self, *names: str) -> LearnerBuilder:
        """Metrics to show while training (all are logged to metrics.jsonl)."""
        return self._set("metrics", names)

    def with_file_checkpointer(self, every_steps: int | None = None, every_micro_batches: int | None = None,
                               keep: int = 2) -> LearnerBuilder:
        """Checkpoint every ``every_steps`` optimizer steps and/or every ``every_micro_batches``
        micro-batches (mid-window checkpoints resume mid-window); keep the newest ``keep``."""
        if every_steps is None and every_micro_batches is None:
            every_steps = 1
        if every_steps is not None:
            _EVERY.check("every_steps", every_steps)
        if every_micro_batches is not None:
            _EVERY.check("every_micro_batches", every_micro_batches)
        _EVERY.check("keep", keep)
        self._set("checkpoint_every_steps", every_steps)
        self._set("checkpoint_every_micro_batches", every_micro_batches)
        return self._set("checkpoint_keep", keep)

    def trace(self, path: str | os.PathLike[str] | None) -> LearnerBuilder:
        """Write a Chrome/Perfetto trace of ``fit`` to ``path`` (a ``.json`` file: open it in
        ui.perfetto.dev): every window, micro-batch, kernel and its path, the close, the step and
        the memory counters; under mpiexec one file per rank. None turns it off."""
        return self._set("trace_out", path)

    def devices(self, devices: list[str]) -> LearnerBuilder:
        return self._set("devices", devices)

    def seed(self, seed: int) -> LearnerBuilder:
        """Seed the library's generator (dropout) when training starts."""
        if seed is None:
            raise ValueError("seed must be an int, got None")
        return self._set("seed", seed)

    def replay(self, enabled: bool = True) -> LearnerBuilder:
        """Capture each micro-batch's forward once and replay it for the next ones of the same
        shapes (on by default; bit for bit the eager gradients); ``replay(False)`` runs every one eagerly."""
        return self._set("replay", enabled)

    def drop_last_window(self, drop: bool = True) -> LearnerBuilder:
        """Drop a partial window at the end of an epoch instead of stepping it."""
        return self._set("drop_last_window", drop)

    def progress(self, mode: str | Progress) -> LearnerBuilder:
        """``"rich"``, ``"plain"``, ``"none"`` or ``"auto"`` (rich on a terminal, plain otherwise), or a
        Progress of your own (``train.tui.MonitorProgress``, the terminal monitor)."""
        return self._set("progress", mode)

    def distributed(self, communicator: str | Communicator = "auto", *, zero: bool = False,
                    bucket_bytes: int = 25 << 20, first_bucket_bytes: int = 1 << 20,
                    check_every: int = 50, overlap: bool = False) -> LearnerBuilder:
        """Data-parallel training: each rank accumulates its share of every window and the window is
        summed over the ranks once, when it closes.

        ``communicator``: ``"auto"`` (MPI when started by ``mpiexec -n R`` with R > 1, else one
        process, trained as without this call), ``"mpi"``, ``"nccl"``, ``"local"`` or a
        Communicator. k (grads_accumulation) is per rank: R ranks x k x b is one window of R*k*b
        items. ``zero``: ZeRO-1 (each rank keeps the optimizer state of its shard).
        ``bucket_bytes``/``first_bucket_bytes``: the pieces one collective call reduces.
        ``check_every``: optimizer steps between checks that every rank holds the same parameters.
        ``overlap``: start each bucket's reduction during the window's last backward (off by
        default: on the CPU it measured slower, see docs/distributed.md)."""
        if isinstance(communicator, Communicator):
            self._config.distributed = communicator
        elif communicator not in COMMUNICATORS:
            raise ValueError(f"communicator must be one of {', '.join(COMMUNICATORS)} or a Communicator, "
                             f"got {communicator!r}")
        else:
            self._set("distributed", communicator)
        for name, value in (("zero", zero), ("bucket_bytes", bucket_bytes),
                            ("first_bucket_bytes", first_bucket_bytes), ("check_every", check_every),
                            ("overlap", overlap)):
            self._set(name, value)
        return self

    def config(self, settings: Any) -> LearnerBuilder:
        """Record the run's own settings (a dict of JSON values, or a dataclass of them) in every
        checkpoint; a resume with different settings is refused."""
        if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
            settings = dataclasses.asdict(settings)
        if not isinstance(settings, dict):
            raise TypeError(f"config expects a dict or a dataclass, got {type(settings).__name__}")
        # checked now, not at the first checkpoint (after training up to it); tuples are taken as
        # the lists JSON gives back, which a resume compares equal
        settings = _tuples_as_lists(dict(settings))
        check_json_exact(settings, "config")
        self._config.run_config = settings
        return self

    def allow_config_change(self, allow: bool = True) -> LearnerBuilder:
        """Let a resume continue with settings that differ from the checkpoint's (saying which)."""
        return self._set("allow_config_change", allow)

    def strict_numerics(self, strict: bool = True) -> LearnerBuilder:
        """Refuse, rather than say so in one line, ranks or a resume that compute with another BLAS
        kernel or NumPy SIMD target (``backend/numerics.py``): they would not be bit for bit."""
        return self._set("strict_numerics", strict)

    def callback(self, callback: Callback) -> LearnerBuilder:
        """Call ``callback.on_step_end(learner, record)`` after every optimizer step, on every rank
        (see ``train/callbacks.py``); callbacks run in the order they were added."""
        self._callbacks.append(check_callback(callback))
        return self

    def on_step_end(self, fn: Callable[[Learner, dict[str, Any]], Any]) -> LearnerBuilder:
        """Call ``fn(learner, record)`` after every optimizer step (a function as a callback)."""
        return self.callback(StepEndFunction(fn))

    def build(self, model: Module, optimizer: Optimizer) -> Learner:
        if not isinstance(model, Module):
            raise TypeError(f"build: model must be a Module, got {type(model).__name__}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"build: optimizer must be an Optimizer, got {type(optimizer).__name__}")
        if self._config.effective_batch is not None and self._config.accumulation_schedule is not None:
            raise ValueError("give either effective_batch or accumulation_schedule, not both")
        return Learner(model, optimizer, self._config, callbacks=self._callbacks)


def _tuples_as_lists(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_tuples_as_lists(item) for item in value]
    if type(value) is dict:
        return {key: _tuples_as_lists(item) for key, item in value.items()}
    return value

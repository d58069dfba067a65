"""The Learner: training with gradient accumulation as a first-class mode.

One optimizer step per window of k micro-batches; the learning-rate scheduler and
the step-level metrics advance per optimizer step, never per micro-batch; a
partial window at the end of an epoch is stepped and normalized by what it holds
(unless asked to drop it); windows never cross epochs.

The loop is here (``fit`` -> ``_train_epoch`` -> ``_micro_batch`` and ``_optimizer_step``);
its configuration is the table in ``train/settings.py``, a window's metrics line is built by
``train/window_record.py`` and checkpoints and resume are ``train/resume.py``.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator, DynamicLossScaler
from minitorch_accum.accum.normalization import micro_batch_loss_reduction
from minitorch_accum.autodiff import Replay
from minitorch_accum.backend import manual_seed
from minitorch_accum.data import DataLoader
from minitorch_accum.distributed import Communicator, DataParallel, LocalCommunicator, WindowShare, rank_windows
from minitorch_accum.distributed.launch import make_communicator
from minitorch_accum.distributed.parameter_sync import broadcast_parameters, parameters_agree
from minitorch_accum.distributed.rank_agreement import check_ranks_agree, compare_rank_numerics
from minitorch_accum.distributed.zero import ZeroRedundancy, ZeroRedundancyOptimizer
from minitorch_accum.durable_files import describe_os_error
from minitorch_accum.nn import Module
from minitorch_accum.observe import PeakMemory
from minitorch_accum.observe.trace import trace_span
from minitorch_accum.optim import Optimizer, clip_grad_norm
from minitorch_accum.train.callbacks import Callback, check_callback
from minitorch_accum.train.checkpoint import CheckpointError
from minitorch_accum.train.history import History
from minitorch_accum.train.memory_budget import plan_learner_micro_batch
from minitorch_accum.train.metrics import MetricsLog
from minitorch_accum.train.progress import Progress, make_progress, write_line
from minitorch_accum.train.resume import LearnerCheckpoints
from minitorch_accum.train.run_agreement import describe_run
from minitorch_accum.train.run_directory import RunCompleteError, RunDirectoryError, check_run_directory
from minitorch_accum.train.run_lock import RunLock
from minitorch_accum.train.run_parts import RunParts
from minitorch_accum.train.settings import LearnerConfig
from minitorch_accum.train.step import Classifier, TrainOutput, replayable
from minitorch_accum.train.stop_request import StopRequest, TrainingAborted, TrainingInterrupted
from minitorch_accum.train.training_trace import TraceWriteError, TrainingTrace
from minitorch_accum.train.window_record import WindowTotals, step_record

__all__ = ["Learner"]


class Learner:
    """Trains a step model (``train_step``/``valid_step``; a plain Module is wrapped in a
    Classifier) with an optimizer, as configured by LearnerBuilder.

    Data-parallel (``LearnerBuilder.distributed``): every rank runs this same code on its
    share of each window (``rank_windows``); the window is summed over the ranks once,
    when it closes; rank 0 alone logs, shows progress and writes files."""

    #: what the line a stop prints says of going on from its checkpoint (``maccum compare``, which
    #: starts its runs afresh, says so instead)
    resume_hint = "resume with fit(..., resume=True) or maccum train --resume"

    def __init__(self, model: Module, optimizer: Optimizer, config: LearnerConfig,
                 callbacks: Sequence[Callback] = ()) -> None:
        self.step_model = model if hasattr(model, "train_step") else Classifier(model)
        self.model = model
        self.optimizer = optimizer
        self.config = config
        #: called after every optimizer step, on every rank (``train/callbacks.py``)
        self.callbacks = [check_callback(c) for c in callbacks]
        self.directory = Path(config.directory)
        if len(config.devices) != 1:
            raise ValueError(f"training on {len(config.devices)} devices is not supported yet; "
                             "pass exactly one device")
        self.device = config.devices[0]
        self.step_model.to(device=self.device)
        if config.mixed_precision is not None:
            self.step_model.to(dtype={"bf16": "bfloat16", "fp16": "float16"}[config.mixed_precision])
        self.step_model.loss_reduction = micro_batch_loss_reduction(config.reduction)
        self.comm: Communicator = LocalCommunicator()
        self.data_parallel: DataParallel | None = None
        if config.distributed is not None:
            self.comm = make_communicator(config.distributed)
            # "auto" in one process (not started by mpiexec) is plain training, not a data-parallel world of one
            if config.distributed != "auto" or self.comm.world_size > 1 or config.zero or config.overlap:
                self._check_distributed(config)
                reducer = ZeroRedundancy if config.zero else DataParallel
                self.data_parallel = reducer(self.comm, config.bucket_bytes, config.first_bucket_bytes,
                                             config.overlap)
        self.rank, self.world_size = self.comm.rank, self.comm.world_size
        self.is_main = self.rank == 0
        # float16 losses hold at most 65504, so the scale starts at 2^15 rather than PyTorch's 2^16
        scaler = DynamicLossScaler(init_scale=2.0**15) if config.mixed_precision == "fp16" else None
        self.accumulator = Accumulator(self.step_model, steps=config.grads_accumulation,
                                       reduction=config.reduction, fusion=config.fusion,
                                       accum_dtype=config.accum_dtype or "float32", compensated=config.compensated,
                                       loss_scaler=scaler, reducer=self.data_parallel, rounding=config.rounding,
                                       rounding_seed=(config.seed or 0) % 2**64)
        # what steps the parameters: the optimizer, or ZeRO-1 stepping this rank's shard with it
        self.stepper: Optimizer | ZeroRedundancyOptimizer = (
            ZeroRedundancyOptimizer(optimizer, self.accumulator)
            if isinstance(self.data_parallel, ZeroRedundancy) else optimizer)
        #: what the helpers beside the loop (checkpoints, their checks, the memory plan, the ranks' agreement) use
        self.parts = RunParts(self.directory, config, model, self.step_model, optimizer, self.stepper,
                              self.accumulator, self.comm)
        self.checkpoints = LearnerCheckpoints(self.parts)
        self.history = History(rank=self.rank)
        #: optimizer steps taken; the current window's sums; whether the last epoch's validation ran
        self.step = 0
        self.window = WindowTotals()
        self.validated = True
        #: rank 0's metrics log while fit runs (None elsewhere)
        self.log: MetricsLog | None = None
        self._stop = StopRequest()
        # (epoch, next micro-batch) as the loop advances; a checkpoint due at an epoch's end waits for validation
        self._position = (0, 0)
        self._deferred_checkpoint: tuple[int, int] | None = None
        #: the trace of the last fit (``trace_out``), written when it ended
        self.training_trace: TrainingTrace | None = None
        # a signal the ranks agreed on after the last step (the run completes, then stops with it)
        self._end_signal: int | None = None
        #: the step's forward captured and replayed while fit runs (``replay`` setting; None: off, or a
        #: step whose train_step is not the three parts of train/step.py's ReplayableStep)
        self.replay: Replay | None = None
        self._say: Any = None  # where the replay says, once, why a micro-batch ran eagerly

    @property
    def stop_request(self) -> StopRequest:
        """Where a stop is asked for (Ctrl-C, SIGTERM, the terminal monitor's q): acted on at the next
        safe point, with a checkpoint."""
        return self._stop

    @stop_request.setter
    def stop_request(self, request: StopRequest) -> None:
        # a caller that caught signals before fit (maccum train from its first line) hands its request
        # over: a signal already in it stops fit at its first safe point, one after fit stays in it
        self._stop = request

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
            if loader.batch_size is None:
                raise ValueError(f"effective_batch counts the items of a window in micro-batches of a fixed size; the "
                                 f"micro-batches of {loader!r} hold as many items as fit its budget: set "
                                 "grads_accumulation (k), the micro-batches per window, instead")
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

    # ------------------------------------------------------------------ fit
    def fit(self, train_loader: DataLoader, valid_loader: DataLoader | None = None, resume: bool = False,
            overwrite: bool = False) -> tuple[Module, History]:
        """Train for ``num_epochs``; returns (model, history).

        ``resume=True`` restores the latest intact checkpoint in the directory and goes on from
        it (RunCompleteError when the run there is complete: nothing to resume); a new run into
        a directory that already holds one is refused unless ``overwrite`` (which removes only
        what this library wrote there). One run at a time holds the directory's lock.

        Ctrl-C or SIGTERM, from the start of fit to the last byte of ``final.safetensors``,
        finishes the micro-batch (data-parallel: the window), saves a checkpoint and raises
        TrainingInterrupted (a KeyboardInterrupt); one that comes after the last optimizer step
        lets the final parameters be written first (``complete``). A second Ctrl-C before the
        stop's checkpoint is saved raises TrainingAborted at once, without one
        (``train/stop_request.py``). The trace (``trace_out``) is written after the final
        parameters, so failing to write it never costs them.

        Data-parallel, every rank first checks that all ranks mean the same run (settings, data,
        model: ``train/run_agreement.py``) and raises the same RanksDisagreeError otherwise; ranks that
        compute with another BLAS kernel or NumPy SIMD target are named in one line, or refused with
        ``strict_numerics`` (``backend/numerics.py``), as is a resume on a machine that computes otherwise
        than the checkpoint's."""
        TrainingTrace.check_path(self.config.trace_out, self.comm)  # every rank, before the lock: not after training
        try:
            with contextlib.ExitStack() as hold:
                # from the lock to the last byte: a signal at any instant leaves a checkpoint or a complete run
                hold.enter_context(self._stop.installed())
                self._start_run(hold, resume, overwrite)
                return self._fit(train_loader, valid_loader, resume)
        except (TrainingInterrupted, TrainingAborted):
            self._stop.signal = None  # acted on: a later fit of this learner starts afresh
            raise

    def _start_run(self, hold: contextlib.ExitStack, resume: bool, overwrite: bool) -> None:
        """Rank 0 takes the directory's lock and checks it may start there (a resume: that the run
        is not complete); every rank raises the same kind of error when it may not."""
        failure: Exception | None = None
        if self.is_main:  # rank 0 alone owns the directory
            try:
                hold.enter_context(RunLock(self.directory))
                check_run_directory(self.directory, resume=resume, overwrite=overwrite)
                self.checkpoints.remove_leftovers()
                if resume:
                    self.checkpoints.check_not_complete(self.config.num_epochs)
            except (RunDirectoryError, CheckpointError, OSError) as error:
                failure = error
        outcome = 0 if failure is None else 2 if isinstance(failure, RunCompleteError) else 1
        if self.world_size > 1:  # every rank stops, none waits in a collective
            outcome = int(self.comm.allreduce_scalars([outcome if self.is_main else 0], np.int64)[0])
        if failure is not None:
            raise failure
        if outcome == 2:
            raise RunCompleteError(f"the run in {self.directory} is complete (see rank 0's message): nothing to resume",
                                   rank=self.rank)
        if outcome:
            raise RunDirectoryError(f"rank 0 could not start the run in {self.directory} (see its message)")

    def _fit(self, train_loader: DataLoader, valid_loader: DataLoader | None, resume: bool) -> tuple[Module, History]:
        config = self.config
        self.log = log = MetricsLog(self.directory / "metrics.jsonl") if self.is_main else None
        if config.memory_budget is not None:
            train_loader, self.history.memory_plan = plan_learner_micro_batch(self.parts, train_loader)
        progress = make_progress(config.progress if self.is_main else "none", metrics=config.metrics)
        self.checkpoints.settings = self.checkpoints.record(train_loader)
        notes: list[str] = []
        alerts: list[str] = []  # said whatever the progress display (``numerics: ...``)
        if self.world_size > 1:  # before the first collective that ranks of different runs would not match
            check_ranks_agree(self.comm, describe_run(self.parts, train_loader, resume))
            differs = compare_rank_numerics(self.comm, self.checkpoints.numerics, config.strict_numerics,
                                            products={p.data.dtype for p in self.parts.model.parameters()})
            if differs is not None:
                alerts.append(differs)
        start_epoch, start_batch = 0, 0
        if resume:
            resumed = self.checkpoints.restore(train_loader, progress, notes, alerts)
            start_epoch, start_batch = resumed.epoch, resumed.next_batch
            self.step, self.validated, self.window = resumed.step, resumed.validated, resumed.window
            if log is not None:
                torn = log.truncate_after(self.step)
                if torn is not None:
                    notes.append(torn)
                self.history.steps = [r for r in log.records if r.get("kind") == "train"]
                self.history.valid = [r for r in log.records if r.get("kind") == "valid"]
        else:
            self.checkpoints.window_origin = {"epoch": 0, "next_batch": 0, "step": self.step}
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
        for alert in alerts:
            progress.message(alert)
            if self.is_main and type(progress) is Progress:  # --progress none shows nothing: stderr then
                write_line(alert)
        self._say = progress.message
        self.replay = (self.accumulator.capture(self.step_model.step_forward, listener=self._replay_heard)
                       if config.replay and replayable(self.step_model) else None)
        if config.replay and self.replay is None:
            progress.message(f"replay: {type(self.step_model).__name__}'s train_step is not its step_inputs, "
                             "step_forward and step_output (train/step.py's ReplayableStep), so every micro-batch "
                             "runs its Python")
        self._position = (start_epoch, start_batch)
        if config.trace_out is not None:
            self.training_trace = TrainingTrace(config.trace_out, self.accumulator, self.comm)
        try:
            with self.training_trace or contextlib.nullcontext():
                if self.world_size == 1 and self._stop.signal is not None:  # before the first micro-batch
                    self._interrupt_at_start(start_epoch, start_batch, resume, progress)
                if resume and not self.validated and valid_loader is not None:
                    self._validate(start_epoch - 1, valid_loader, log, progress)  # the kill came before it
                for epoch in range(start_epoch, config.num_epochs):
                    self._train_epoch(epoch, train_loader, start_batch if epoch == start_epoch else 0, log,
                                      valid_loader is not None, progress)
                    if valid_loader is not None:
                        self._validate(epoch, valid_loader, log, progress)
                        if self._deferred_checkpoint is not None:
                            self._save(*self._deferred_checkpoint)
                self._stop.finishing()  # every step is taken: what follows writes the run's result
        except BaseException:
            self._write_trace(complete=False, final=None)
            raise
        finally:
            progress.stop()
        final = self._save_final()
        self._write_trace(complete=True, final=final)
        # one process: any signal so far; data-parallel: the one the ranks agreed on (a later one stays
        # in the stop request, for the caller: maccum train then exits with its status)
        end = self._stop.signal if self.world_size == 1 else self._end_signal
        if end is not None:  # it came after the last step: the run is complete, then stopped
            raise TrainingInterrupted(end, final, self.step, self.comm if self.world_size > 1 else None,
                                      complete=True)
        return self.model, self.history

    def _save_final(self) -> Path | None:
        """Rank 0 writes ``final.safetensors``; data-parallel, the ranks then agree (one collective)
        on whether it was written and on any signal received since the last window, so every rank
        ends alike (``_end_signal``: the signal to stop with once the run is complete)."""
        failure: RunDirectoryError | None = None
        final = None
        if self.is_main:
            try:
                final = self.checkpoints.save_final(self.step)
            except RunDirectoryError as error:
                failure = error
        self._end_signal = None
        if self.world_size > 1:
            mine = self._stop.signal or 0
            terms, ints, failed = (int(v) for v in self.comm.allreduce_scalars(
                [mine == signal.SIGTERM, mine == signal.SIGINT, failure is not None], np.int64))
            self._end_signal = signal.SIGTERM if terms else signal.SIGINT if ints else None
            if failed and failure is None:
                failure = RunDirectoryError(f"rank 0 could not write {self.directory / 'final.safetensors'} "
                                            "(see its message)")
        if failure is not None:
            raise failure
        return final

    def _write_trace(self, complete: bool, final: Path | None) -> None:
        """Write this rank's trace, if one was recorded. After a complete run, failing says the final
        parameters were kept; on the way out of a stop or an error it is said on stderr and the stop
        goes on."""
        if self.training_trace is None:
            return
        try:
            self.training_trace.write()
        except OSError as error:
            what = f"cannot write the trace {self.training_trace.path}: {describe_os_error(error)}"
            if complete:
                kept = final if final is not None else "final.safetensors (written by rank 0)"
                raise TraceWriteError(f"{what}; the run is complete: {kept} was kept") from error
            write_line(f"maccum: {what}")

    def _interrupt_at_start(self, epoch: int, next_batch: int, resume: bool, progress: Progress) -> None:
        """A signal came before the first micro-batch (one process): stop with a checkpoint of the start."""
        path = self.checkpoints.restored_from if resume else self._save(epoch, next_batch)
        self._stop.saved()
        self._say_stopped(progress, path)
        raise TrainingInterrupted(self._stop.signal or signal.SIGINT, path, self.step)

    def _train_epoch(self, epoch: int, loader: DataLoader, start_batch: int, log: MetricsLog | None,
                     validates: bool, progress: Progress) -> None:
        config = self.config
        acc = self.accumulator
        k = self.steps_for_epoch(epoch, loader)
        if acc.micro_step == 0:
            acc.set_steps(k)
        self._deferred_checkpoint = None
        # a checkpoint taken mid-window (one process) resumes inside that window
        windows = self._windows(loader, k, start=start_batch - acc.micro_step)
        for window in windows:
            for index in window.batches:
                if index < start_batch:
                    continue  # restored with the window
                self._position = (epoch, index)
                self._micro_batch(loader.batch(epoch, index), closes_window=index == window.batches[-1])
                self._stop.abort_if_pending()  # a second Ctrl-C deferred out of a memory probe
                progress.micro_batch(self.step, acc.micro_step, k)
                self._position = (epoch, index + 1)
                if self.world_size == 1 and index + 1 < window.stop:
                    every = config.checkpoint_every_micro_batches
                    if every and (index + 1) % every == 0:
                        self._save(epoch, index + 1)
                    if self._stop.signal is not None:
                        self._interrupt(epoch, index + 1, progress)
            self._position = (epoch, window.stop)
            if self.data_parallel is not None:
                self.data_parallel.stop_requested = self._stop.signal is not None
            self._optimizer_step(epoch, log, progress, ends_epoch=window is windows[-1] and validates)
            if self._stop_due():
                self._interrupt(epoch, window.stop, progress)

    def _stop_due(self) -> bool:
        """Whether to stop at this window's end. Data-parallel: only on a request in the window's
        facts, which every rank holds; a signal that arrived later is in the next window's."""
        if self.data_parallel is not None:
            return self.data_parallel.stop_agreed
        return self._stop.signal is not None

    def _micro_batch(self, batch: Any, closes_window: bool) -> None:
        self.step_model.train()
        start = time.perf_counter()
        trace = self.accumulator.trace
        with (trace_span(trace, f"micro-batch {self.accumulator.micro_step}", "micro-batches"),
              PeakMemory(self.accumulator.device()) as probe):
            with trace_span(trace, "forward", "micro-batches") as span:
                out = self._forward(batch)
                if span is not None and self.replay is not None and self.replay.last is not None:
                    span["replay"] = self.replay.last.outcome
            self._check_output(out)
            self.accumulator.backward(out.loss, out.num_items, closes_window=closes_window)
        self.window.add(out, time.perf_counter() - start, probe)

    def _save(self, epoch: int, next_batch: int) -> Path | None:
        """A checkpoint before micro-batch ``next_batch`` of ``epoch``: rank 0 writes it (and returns its
        path), every rank takes part."""
        if self.log is not None:
            self.log.sync()  # the log holds every step the checkpoint covers
        return self.checkpoints.save(epoch, next_batch, self.step, self.validated, self.window)

    def _forward(self, batch: Any) -> Any:
        """The step's TrainOutput of ``batch``: its forward replayed when it can be."""
        step = self.step_model
        if self.replay is None:
            return step.train_step(batch)
        return step.step_output(batch, self.replay(*step.step_inputs(batch)))

    def _replay_heard(self, report: Any) -> None:
        if report.first and self._say is not None:  # each reason once, not every micro-batch
            self._say(f"replay: {report.reason}; such micro-batches run eagerly")

    def _interrupt(self, epoch: int, next_batch: int, progress: Progress) -> None:
        # data-parallel, every rank is here at the same window end: one signal (and status) for all
        signum = self._stop.agreed_signal(self.comm) if self.data_parallel is not None else self._stop.signal or 2
        saved_at, path = self.checkpoints.last_saved
        if saved_at != (self.step, epoch, next_batch):  # not saved here already (a periodic checkpoint)
            path = self._save(epoch, next_batch)
        self._stop.saved()
        self._say_stopped(progress, path)
        raise TrainingInterrupted(signum, path, self.step, self.comm if self.data_parallel is not None else None)

    def _say_stopped(self, progress: Progress, checkpoint: Any) -> None:
        progress.stop()  # the display ends first, so that nothing of it is printed after the line that says why
        progress.message(f"interrupted: saved {checkpoint}; {self.resume_hint}")

    def _check_output(self, out: Any) -> None:
        if not isinstance(out, TrainOutput):
            raise TypeError(f"train_step must return a TrainOutput, got {type(out).__name__}")
        expected = micro_batch_loss_reduction(self.config.reduction)
        if out.reduction != expected:
            raise ValueError(f"reduction={self.config.reduction!r} needs train_step to return a {expected} loss; "
                             f"it returned a {out.reduction} loss")

    def _optimizer_step(self, epoch: int, log: MetricsLog | None, progress: Progress, ends_epoch: bool) -> None:
        config = self.config
        acc = self.accumulator
        start = time.perf_counter()
        skipped = acc.found_nonfinite()  # data-parallel: the window is summed over the ranks here
        lr = self.optimizer.lr
        grad_norm = None
        if not skipped:
            if config.lr_scheduler is not None:
                lr = config.lr_scheduler.step()
            grad_norm = clip_grad_norm(acc, config.clip_grad_norm) if config.clip_grad_norm else acc.grad_norm()
            with trace_span(acc.trace, "optimizer step", "window", step=self.step + 1):
                self.stepper.step(self.step_model, acc, lr=lr)
        micro = acc.micro_step
        acc.zero()
        step_seconds = time.perf_counter() - start
        self.step += 1
        record = step_record(self.window, self.comm, epoch=epoch, step=self.step, micro_batches=micro, lr=lr,
                             grad_norm=grad_norm, step_seconds=step_seconds, skipped=skipped)
        if self.world_size > 1 and self.data_parallel is not None and self.step % config.check_every == 0:
            parameters_agree(self.step_model, self.comm, self.step)
        if log is not None:
            log.write(record)
        self.history.steps.append(record)
        progress.step(record)
        for callback in self.callbacks:
            callback.on_step_end(self, record)
        self.window = WindowTotals()
        if ends_epoch:
            self.validated = False
        if config.checkpoint_every_steps and self.step % config.checkpoint_every_steps == 0:
            if ends_epoch:  # after validation, so the checkpoint can say it ran
                self._deferred_checkpoint = self._position
            else:
                self._save(*self._position)

    def _validate(self, epoch: int, loader: DataLoader, log: MetricsLog | None, progress: Progress) -> None:
        record = self.evaluate(loader)
        record.update(kind="valid", epoch=epoch, step=self.step)
        if log is not None:
            log.write(record)
        self.history.valid.append(record)
        self.validated = True
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

"""The one table of training settings, from the command line to the checkpoint.

Each row says once what a setting is called, how its values are checked, its default, its
help line, its command-line option (and the commands that offer it), and whether a resume
may change it. From this table come:

- the options of ``maccum train``, ``compare`` and ``explain`` (``add_options``/``read_options``),
- the Learner's configuration (``LearnerConfig``: a typed field per ``learner`` row, its default the
  row's; ``tests/train/test_settings.py`` holds the fields to the rows),
- what every checkpoint records and what a resume compares (``train/run_settings.py``: each row
  a resume must keep is recorded, a difference is refused naming the row).

Where a row goes (``target``): ``learner`` rows are fields of LearnerConfig; ``task`` rows are
what the command line builds the model, data and optimizer from (recorded under ``run.``);
``loader`` is the micro-batch, the DataLoader's batch size (the Learner records it, or a
TokenBudgetLoader's budget); ``command`` rows steer one invocation and are never recorded.
Data-parallel ranks must hold the same value of every learner row (``train/run_agreement.py``
checks it at the start), except a ``per_rank`` one. A row with an ``output`` names a path the
command writes, checked by ``check_outputs`` before the command runs. A new setting is one row
here (a learner row also its field of LearnerConfig) plus its use.

Each value is checked once, by its row's kind, where it enters: ``read_options`` for the command
line (errors name the option: ``--accum (k)``), ``LearnerBuilder`` for the API (``grads_accumulation
(k)``); ``learner_config`` and the Learner take checked values as they are.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minitorch_accum.accum import ARENA_DTYPES, FUSIONS, REDUCTIONS, ROUNDINGS
from minitorch_accum.backend import parse_device
from minitorch_accum.data import DATASETS
from minitorch_accum.distributed import Communicator
from minitorch_accum.distributed.launch import COMMUNICATORS
from minitorch_accum.durable_files import check_output_path
from minitorch_accum.models import DIGITS_MLP_VARIANTS
from minitorch_accum.optim.lr_scheduler import LRScheduler
from minitorch_accum.train.metrics import METRICS
from minitorch_accum.train.progress import PROGRESS_MODES, Progress
from minitorch_accum.train.setting_kinds import Choice, Flag, Integer, Kind, Number, Optional, Value
from minitorch_accum.train.training_trace import trace_file_name

__all__ = ["OPTIMIZERS", "SETTINGS", "TRAINING_COMMANDS", "LearnerConfig", "ProgressMode", "Setting", "add_options",
           "check_outputs", "commanded", "learner_config", "read_options", "setting", "typed_options"]

#: the commands whose options come from this table
TRAINING_COMMANDS = ("train", "compare", "explain")
#: the optimizers of the command line: AdamW without weight decay, SGD with momentum 0.9
OPTIMIZERS = ("adamw", "sgd")
_TRAINING = ("train", "compare")
_ALL = TRAINING_COMMANDS
_SAME = object()  # a row's command-line default is its API default


@dataclass(frozen=True)
class Setting:
    """One row of the table (see the module's docstring for ``target``)."""

    name: str
    kind: Kind
    default: Any
    help: str
    target: str = "learner"
    resume: bool = False  # True: a resume may change it (never recorded); False: recorded, a change is refused
    flag: str | None = None  # its command-line option; None: the API alone sets it
    cli_default: Any = _SAME
    commands: tuple[str, ...] = _TRAINING
    symbol: str | None = None  # the letter the docs use (k), shown in errors
    per_rank: bool = False  # True: each data-parallel rank may hold its own value (never compared between ranks)
    output: str | None = None  # "file" or "directory": a path the command writes, checked before it starts

    def label(self, from_command_line: bool = False) -> str:
        """How errors name it: ``grads_accumulation (k)`` in the API, ``--accum (k)`` on the command line."""
        base = self.flag if from_command_line and self.flag else self.name
        return f"{base} ({self.symbol})" if self.symbol else base

    def check(self, value: Any, from_command_line: bool = False) -> Any:
        return self.kind.check(self.label(from_command_line), value)

    def command_default(self, command: str, overrides: Mapping[str, Any] | None = None) -> Any:
        if overrides and self.name in overrides:
            return overrides[self.name]
        return self.default if self.cli_default is _SAME else self.cli_default


def _schedule(name: str, value: Any) -> dict[int, int]:
    if not isinstance(value, Mapping) or 0 not in value:
        raise ValueError(f"{name} needs an entry for epoch 0")
    for epoch, k in value.items():
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"{name}: epochs must be non-negative ints, got {epoch!r}")
        Integer(1).check(f"{name}[{epoch}] (k)", k)
    return dict(value)


def _devices(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    parsed = tuple(str(parse_device(d)) for d in value)
    if not parsed:
        raise ValueError(f"{name} needs at least one device")
    return parsed


def _metrics(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    for metric in value:
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}: expected one of {', '.join(METRICS)}")
    return tuple(dict.fromkeys(value))


def _scheduler(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, LRScheduler):
        raise TypeError(f"{name} expects an LRScheduler, got {type(value).__name__}")
    return value


def _pace(name: str, value: Any) -> float:
    if isinstance(value, str):  # the command line's text
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be seconds >= 0, got {value!r}")
    return float(value)


def _png_name(name: str, value: Any) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str | Path) or Path(value).suffix.lower() != ".png":
        raise ValueError(f"{name} must be a file name ending in .png, got {value!r}")
    return Path(value)


@dataclass(frozen=True)
class ProgressMode(Choice):
    """A progress display by name, or a ``train.progress.Progress`` that shows the run (the TUI's)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, Progress) or super().accepts(value)

    def describe(self) -> str:
        return super().describe() + ", or a Progress"


_POSITIVE = Integer(1)
_MAYBE_POSITIVE = Optional(_POSITIVE)

# name, kind, default (the API's), help; then where it goes, whether a resume may change it, its option
SETTINGS: tuple[Setting, ...] = (
    # ---- the window: how gradients are accumulated and normalized (a resume must keep these)
    Setting("grads_accumulation", _POSITIVE, 1, "micro-batches per optimizer step (k; per rank when data-parallel)",
            flag="--accum", cli_default=8, commands=_ALL, symbol="k"),
    Setting("micro_batch", _POSITIVE, None, "micro-batch size b: images, sentences or rows of characters",
            target="loader", flag="--micro-batch", cli_default=32, commands=_ALL),
    Setting("effective_batch", _MAYBE_POSITIVE, None, "items per optimizer step; k is derived from the micro-batch"),
    Setting("accumulation_schedule", Optional(Value(_schedule, "a dict epoch -> k")), None,
            "k by epoch, as Lightning's GradientAccumulationScheduler: {0: 8, 4: 4}"),
    Setting("reduction", Choice(REDUCTIONS), "items",
            "how a window is normalized: by its items (exact), micro-batches, the configured k (Lightning's "
            "mean_nominal), or not at all",
            flag="--reduction", commands=_ALL),
    Setting("fusion", Choice(FUSIONS), "gemm",
            "where gradients land: GEMM writes the arena, fused kernels, or Burn's containers",
            flag="--fusion", commands=_ALL),
    Setting("accum_dtype", Optional(Choice(ARENA_DTYPES)), "float32",
            "dtype of the gradient arena (default on the command line: the --dtype); bfloat16 takes half the bytes "
            "of float32, each sum rounded back as --rounding says", flag="--grad-dtype", cli_default=None),
    Setting("rounding", Choice(ROUNDINGS), "nearest",
            "how a bfloat16 arena rounds each sum: to nearest (an addend under half a unit of the running sum is "
            "lost), or stochastically (up with probability equal to the discarded fraction: exact in expectation; "
            "the random bits keyed by the seed, window, micro-batch and element, so a run replays and resumes bit "
            "for bit)", flag="--rounding"),
    Setting("compensated", Flag(), False, "Neumaier-compensated accumulation: the window's gradient then does not "
            "depend on how it is split over micro-batches and ranks", flag="--compensated"),
    Setting("mixed_precision", Optional(Choice(("bf16", "fp16"))), None,
            "16-bit parameters and activations over a float32 arena; fp16 adds dynamic loss scaling"),
    Setting("clip_grad_norm", Optional(Number(positive=True)), None, "clip the window's gradient to this global norm"),
    Setting("drop_last_window", Flag(), False, "drop a partial window at an epoch's end instead of stepping it"),
    Setting("seed", Optional(Integer(0)), None, "seed of the model, the data order and dropout",
            flag="--seed", cli_default=0, commands=_ALL),
    # ---- what the command line builds the run from (recorded under run.)
    Setting("dataset", Choice(DATASETS), "digits", "built-in task: digits (MLP), sequences (padded sentences), "
            "chars (a character transformer over Shakespeare)", target="task", flag="--dataset", commands=_ALL),
    Setting("lr", Number(positive=True), 3e-3, "learning rate", target="task", flag="--lr"),
    Setting("optimizer", Choice(OPTIMIZERS), "adamw", "AdamW (no weight decay) or SGD with momentum 0.9",
            target="task", flag="--optimizer"),
    Setting("dtype", Choice(("float32", "float64")), "float32", "parameter and accumulation dtype", target="task",
            flag="--dtype", commands=_ALL),
    Setting("model", Choice(("task", *DIGITS_MLP_VARIANTS)), "task",
            "the task's own model, or a digits MLP with a BatchNorm1d (it couples a batch's items) or with "
            "dropout (masks drawn anew per batch): their windows differ from the big batch",
            target="command", resume=True, flag="--model", commands=("explain",)),
    Setting("block_size", _MAYBE_POSITIVE, None, "--dataset chars: characters of context the transformer sees "
            "(default: the task's); a micro-batch of b rows holds b x block-size items", target="task",
            flag="--block-size", commands=_ALL),
    # ---- how long, where and how visibly (a resume may change these)
    Setting("num_epochs", _POSITIVE, 1, "passes over the training set", resume=True, flag="--epochs", cli_default=5),
    Setting("memory_budget", _MAYBE_POSITIVE, None, "bytes: choose the micro-batch (and k) that fits, by measuring "
            "two trial micro-batches", resume=True),
    Setting("checkpoint_every_steps", Optional(Integer(0)), None, "optimizer steps between checkpoints (0: none)",
            resume=True, flag="--checkpoint-every", cli_default=10, commands=("train",)),
    Setting("checkpoint_every_micro_batches", _MAYBE_POSITIVE, None,
            "micro-batches between checkpoints (a checkpoint mid-window resumes mid-window)", resume=True),
    Setting("checkpoint_keep", _POSITIVE, 2, "checkpoints kept (the newest)", resume=True),
    Setting("metrics", Value(_metrics, "names of metrics"), METRICS,
            "metrics the progress display shows (all are logged)", resume=True, per_rank=True),
    Setting("lr_scheduler", Value(_scheduler, "an LRScheduler"), None,
            "a scheduler from optim.lr_scheduler, advanced once per optimizer step (its state is checkpointed)",
            resume=True),
    Setting("progress", ProgressMode(PROGRESS_MODES), "auto", "progress display (rank 0 only)", resume=True,
            flag="--progress", per_rank=True),
    Setting("trace_out", Value(trace_file_name, "None or a file name ending in .json"), None,
            "write a Chrome/Perfetto trace (Trace Event Format: open it in ui.perfetto.dev) of every window: "
            "micro-batches, kernels and their path, the close, the step, memory; one file per rank under "
            "mpiexec (run.trace.rank1.json); explain also writes PyTorch's memory snapshot beside it; its directory "
            "must exist and take new files (checked before the first step)",
            resume=True, flag="--trace-out", commands=("train", "explain"), per_rank=True, output="file"),
    Setting("figure", Value(_png_name, "None or a file name ending in .png"), None,
            "draw the window's timeline (forward and backward of each micro-batch, the kernels writing the arena, "
            "the array bytes alive, the close, the step) beside one batch of the same items, as a PNG; its directory "
            "must exist and take new files (checked before anything runs)",
            target="command", resume=True, flag="--figure", commands=("explain",), output="file"),
    Setting("tui", Flag(), False, "watch the run in a terminal monitor (Textual, after Burn's): metric tabs (loss, "
            "accuracy, lr, gradient norm, items/s or tokens/s) with full, recent and summary views, the status "
            "(micro-step k/K, effective batch), progress and ETA, the window filling and its memory, checkpoints; "
            "q asks: stop at the window's end with a checkpoint, kill now without one, or cancel (without a "
            "terminal: the plain progress)", target="command", resume=True, flag="--tui", commands=("train",)),
    Setting("pace", Optional(Value(_pace, "seconds >= 0")), None,
            "with --tui: seconds an optimizer step takes at least, so a small task can be watched (0: full speed; "
            "default: a run is stretched to about 30 s, at most 1 s a step; the items/s shown leave the wait out)",
            target="command", resume=True, flag="--pace", commands=("train",)),
    Setting("devices", Value(_devices, "a list of devices"), ("cpu",),
            "cpu or cuda[:N] (data-parallel: each rank its own GPU)", resume=True, flag="--device", cli_default="cpu",
            per_rank=True),
    Setting("allow_config_change", Flag(), False,
            "with --resume: continue even if settings differ from the checkpoint's (says which)", resume=True,
            flag="--allow-config-change", commands=("train",)),
    Setting("strict_numerics", Flag(), False,
            "refuse to train when data-parallel ranks, or the machine a run resumes on and the checkpoint's, compute "
            "with another BLAS kernel or NumPy SIMD target (without it, one line says the run then equals one "
            "process, or an uninterrupted run, up to rounding, not bit for bit)", resume=True,
            flag="--strict-numerics", commands=("train",)),
    # ---- data parallelism (how the work is shared, not what is computed)
    Setting("distributed", Optional(Choice(COMMUNICATORS)), None,
            "communicator: auto = MPI when started by mpiexec with more than one rank (None: one process)",
            resume=True, flag="--distributed", cli_default="auto", commands=("train",)),
    Setting("zero", Flag(), False, "ZeRO-1: shard the reduced gradient and the optimizer state over the ranks",
            resume=True, flag="--zero", commands=("train",)),
    Setting("overlap", Flag(), False, "start each bucket's reduction during the window's last backward",
            resume=True, flag="--overlap", commands=("train",)),
    Setting("bucket_bytes", _POSITIVE, 25 << 20, "bytes one collective call reduces", resume=True),
    Setting("first_bucket_bytes", _POSITIVE, 1 << 20, "bytes of the first (smallest) bucket", resume=True),
    Setting("check_every", _POSITIVE, 50, "optimizer steps between checks that every rank holds the same parameters",
            resume=True),
    # ---- one invocation of a command
    Setting("out", Kind(), None, "directory for metrics, checkpoints, final parameters: created with its parents "
            "if missing; its nearest existing part must be a directory that takes new files (checked before the "
            "first step)", target="command", resume=True, flag="--out", cli_default="runs/train", commands=_TRAINING,
            output="directory"),
    Setting("resume", Flag(), False, "continue from the latest checkpoint in --out", target="command", resume=True,
            flag="--resume", commands=("train",)),
    Setting("overwrite", Flag(), False, "start afresh in an --out that already holds a run (its files are replaced)",
            target="command", resume=True, flag="--overwrite", commands=("train",)),
    Setting("replay", Flag(), True, "capture a micro-batch's forward and backward once and replay them for the next "
            "micro-batches of the same shapes, without the model's Python (bit for bit the eager gradients); "
            "--no-replay runs every micro-batch eagerly", resume=True, flag="--replay", commands=_ALL),
    Setting("threads", _MAYBE_POSITIVE, None, "threads of NumPy's and SciPy's BLAS, the native kernels and any "
            "OpenMP pool (default: MTA_THREADS, else the CPUs less the load average, at least 1)",
            target="command", resume=True, flag="--threads", commands=_ALL),
)

_BY_NAME = {row.name: row for row in SETTINGS}


def setting(name: str) -> Setting:
    """The row called ``name`` (KeyError naming the known ones otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no setting {name!r}; the table holds {', '.join(_BY_NAME)}") from None


@dataclass
class LearnerConfig:
    """What LearnerBuilder collected: the directory, one field per learner row of ``SETTINGS`` (in
    the table's order, with its default there: ``tests/train/test_settings.py`` holds them to the
    rows; the row's kind checked each value before it came here), and ``run_config``, the caller's
    own settings recorded under run."""

    directory: Path
    # the window
    grads_accumulation: int = 1
    effective_batch: int | None = None
    accumulation_schedule: dict[int, int] | None = None
    reduction: str = "items"
    fusion: str = "gemm"
    accum_dtype: str = "float32"
    rounding: str = "nearest"
    compensated: bool = False
    mixed_precision: str | None = None
    clip_grad_norm: float | None = None
    drop_last_window: bool = False
    seed: int | None = None
    # how long, where and how visibly
    num_epochs: int = 1
    memory_budget: int | None = None
    checkpoint_every_steps: int | None = None
    checkpoint_every_micro_batches: int | None = None
    checkpoint_keep: int = 2
    metrics: tuple[str, ...] = METRICS
    lr_scheduler: LRScheduler | None = None
    progress: str | Progress = "auto"
    trace_out: Path | None = None
    devices: tuple[str, ...] = ("cpu",)
    allow_config_change: bool = False
    strict_numerics: bool = False
    # data parallelism (LearnerBuilder.distributed also takes a Communicator of the caller's)
    distributed: str | Communicator | None = None
    zero: bool = False
    overlap: bool = False
    bucket_bytes: int = 25 << 20
    first_bucket_bytes: int = 1 << 20
    check_every: int = 50
    replay: bool = True
    run_config: dict[str, Any] | None = None


def learner_config(directory: str | os.PathLike[str], values: Mapping[str, Any]) -> LearnerConfig:
    """The LearnerConfig of ``values`` that their rows have checked (``read_options``): each learner
    row's value its field (a row ``values`` lacks keeps its default), each task row's recorded under
    ``run_config``; nothing is checked twice."""
    fields = {name: value for name, value in values.items() if setting(name).target == "learner"}
    run = {name: value for name, value in values.items() if setting(name).target == "task"}
    return LearnerConfig(directory=Path(directory), **fields, run_config=run or None)


class _Typed(argparse.Action):
    """argparse's store (a flag: ``nargs=0``, its ``const``) that also notes the option was typed: a
    resume takes every other one from the run it continues (``typed_options``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        _note_typed(namespace, self.dest)


class _TypedSwitch(argparse.BooleanOptionalAction):
    """``--name`` / ``--no-name`` of a setting on by default, noted as typed as ``_Typed`` notes."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        _note_typed(namespace, self.dest)


_TYPED = "typed_settings"  # the parsed namespace's set of the rows whose option was typed


def _note_typed(namespace: argparse.Namespace, name: str) -> None:
    setattr(namespace, _TYPED, getattr(namespace, _TYPED, frozenset()) | {name})


def add_options(parser: argparse.ArgumentParser, command: str, defaults: Mapping[str, Any] | None = None) -> None:
    """Add every row's option that ``command`` offers (``defaults``: this command's own defaults by name)."""
    for row in SETTINGS:
        if row.flag is None or command not in row.commands:
            continue
        default = row.command_default(command, defaults)
        if isinstance(row.kind, Flag):  # a setting on by default is turned off by --no-<name>
            if default:
                parser.add_argument(row.flag, dest=row.name, action=_TypedSwitch, default=True, help=row.help)
            else:
                parser.add_argument(row.flag, dest=row.name, action=_Typed, nargs=0, const=True, default=False,
                                    help=row.help)
            continue
        kind = row.kind.kind if isinstance(row.kind, Optional) else row.kind
        choices = kind.values if isinstance(kind, Choice) else None
        metavar = None if choices else row.flag.lstrip("-").upper().replace("-", "_")
        parser.add_argument(row.flag, dest=row.name, action=_Typed, type=row.kind.from_text, default=default,
                            choices=choices, metavar=metavar, help=row.help)


def typed_options(args: argparse.Namespace) -> frozenset[str]:
    """The rows whose option was typed on the command line that ``args`` was parsed from (``add_options``'s
    parser): the others hold their defaults."""
    return frozenset(getattr(args, _TYPED, frozenset()))


def read_options(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Every row's value for one run of ``command``, by name: its option's value, checked
    (ValueError naming the option, ``--accum (k) must be a positive int, got 0``, before anything
    is run or written), or the API's default for a row the command has no option for."""
    values = {row.name: row.default for row in SETTINGS}
    for row in commanded(command):
        values[row.name] = row.check(getattr(args, row.name), from_command_line=True)
    return values


def check_outputs(values: Mapping[str, Any], command: str) -> None:
    """Refuse, before anything runs, an output path of ``command`` that could not be written at
    its end: each row with an ``output`` (``durable_files.check_output_path``'s rules: a file's
    directory must exist and take new files; a directory may be created, but nothing in its
    way may be a file, and its nearest existing part must take new files). UnwritableOutputError
    (an OSError), one line naming the option, the path and why."""
    for row in commanded(command):
        if row.output is not None and values.get(row.name) is not None:
            check_output_path(values[row.name], row.flag or row.name, directory=row.output == "directory")


def commanded(command: str) -> Iterable[Setting]:
    """The rows ``command`` has options for."""
    return (row for row in SETTINGS if row.flag is not None and command in row.commands)

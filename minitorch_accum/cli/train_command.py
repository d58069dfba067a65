"""``maccum train``: train a built-in task with accumulation and write metrics, checkpoints
and the final parameters; under ``mpiexec -n R`` it trains data-parallel on R ranks."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import TASKS, load_task
from minitorch_accum.config import config
from minitorch_accum.data import DEFAULT_BLOCK_SIZE, DataLoader
from minitorch_accum.optim import SGD, AdamW, Optimizer
from minitorch_accum.train import History, LearnerBuilder

__all__ = ["TrainingRun", "add_training_arguments", "make_optimizer", "run_training", "train_command"]


@config
class TrainingRun:
    """The settings of one ``maccum train`` run, recorded in its checkpoints (a resume with
    other settings is refused unless --allow-config-change)."""

    dataset: str = "digits"
    micro_batch: int = 32
    accum: int = 8
    epochs: int = 5
    lr: float = 3e-3
    optimizer: str = "adamw"
    reduction: str = "items"
    fusion: str = "gemm"
    dtype: str = "float32"
    compensated: bool = False
    seed: int = 0
    block_size: int | None = None  # chars: characters per window (None: the task's default)


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=TASKS, default="digits",
                        help="built-in task: digits (MLP), sequences (padded sentences), chars (a character "
                             "transformer over Shakespeare)")
    parser.add_argument("--micro-batch", type=int, default=32,
                        help="micro-batch size b: images, sentences or windows of characters")
    parser.add_argument("--accum", type=int, default=8,
                        help="micro-batches per optimizer step (k; per rank when data-parallel)")
    parser.add_argument("--epochs", type=int, default=5, help="passes over the training set")
    parser.add_argument("--lr", type=float, default=3e-3, help="learning rate")
    parser.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw",
                        help="AdamW (no weight decay) or SGD with momentum 0.9")
    parser.add_argument("--reduction", choices=("items", "mean", "sum"), default="items",
                        help="how a window is normalized: by its items (exact), micro-batches, or not at all")
    parser.add_argument("--fusion", choices=("leaf", "gemm", "none"), default="gemm",
                        help="where gradients land: GEMM writes the arena, fused kernels, or Burn's containers")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="parameter and accumulation dtype")
    parser.add_argument("--compensated", action="store_true",
                        help="Neumaier-compensated accumulation: the window's gradient then does not depend on "
                             "how it is split over micro-batches and ranks")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model, the data order and dropout")
    parser.add_argument("--block-size", type=_positive_int, default=None,
                        help=f"--dataset chars: characters per window, the transformer's context (default "
                             f"{DEFAULT_BLOCK_SIZE}); a micro-batch of b windows holds b x block-size items")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (data-parallel: each rank its own GPU)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def make_optimizer(name: str, lr: float) -> Optimizer:
    return AdamW(lr=lr, weight_decay=0.0) if name == "adamw" else SGD(lr=lr, momentum=0.9)


def _rank_device(device: str) -> str:
    # data-parallel ranks on one host each take their own GPU
    local = os.environ.get("MPI_LOCALRANKID") or os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK")
    if device == "cuda" and local is not None:
        return f"cuda:{int(local)}"
    return device


def run_training(args: Any, out: Path, micro_batch: int, accum: int, progress: str, resume: bool = False,
                 checkpoint_every: int | None = None, overwrite: bool = False) -> History:
    """One training run of a built-in task; the same seed gives the same initial model and order."""
    if micro_batch <= 0:
        raise ValueError(f"--micro-batch must be positive, got {micro_batch}")
    if accum <= 0:
        raise ValueError(f"--accum (k) must be positive, got {accum}")
    manual_seed(args.seed)
    block_size = getattr(args, "block_size", None)
    task = load_task(args.dataset, dtype=args.dtype, block_size=block_size)
    if micro_batch > len(task.train):
        print(f"warning: --micro-batch {micro_batch} is larger than the {len(task.train)} training items of "
              f"{args.dataset}: every micro-batch holds the whole set", file=sys.stderr)
    compensated = bool(getattr(args, "compensated", False))
    run = TrainingRun(dataset=args.dataset, micro_batch=micro_batch, accum=accum, epochs=args.epochs, lr=args.lr,
                      optimizer=args.optimizer, reduction=args.reduction, fusion=args.fusion, dtype=args.dtype,
                      compensated=compensated, seed=args.seed, block_size=block_size)
    builder = (LearnerBuilder(out).num_epochs(args.epochs).grads_accumulation(accum).reduction(args.reduction)
               .fusion(args.fusion).accum_dtype("float64" if args.dtype == "float64" else "float32")
               .compensated(compensated).seed(args.seed).progress(progress)
               .devices([_rank_device(args.device)]).config(run)
               .allow_config_change(getattr(args, "allow_config_change", False)))
    distributed = getattr(args, "distributed", "local")
    zero, overlap = getattr(args, "zero", False), getattr(args, "overlap", False)
    if distributed != "local" or zero or overlap:
        builder = builder.distributed(distributed, zero=zero, overlap=overlap)
    if checkpoint_every:
        builder = builder.with_file_checkpointer(every_steps=checkpoint_every)
    learner = builder.build(task.model, make_optimizer(args.optimizer, args.lr))
    train = DataLoader(task.train, micro_batch, shuffle=True, seed=args.seed)
    valid = DataLoader(task.valid, 512, shuffle=False)
    _, history = learner.fit(train, valid, resume=resume, overwrite=overwrite)
    return history


def train_command(args: Any) -> int:
    out = Path(args.out)
    if args.resume and args.overwrite:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    history = run_training(args, out, args.micro_batch, args.accum, args.progress, resume=args.resume,
                           checkpoint_every=args.checkpoint_every, overwrite=args.overwrite)
    if history.rank != 0:
        return 0  # rank 0 reports for the job
    last = history.valid[-1] if history.valid else {}
    final_loss = "-" if history.final_loss is None else f"{history.final_loss:.4f}"
    print(f"trained {len(history.steps)} optimizer steps; final train loss {final_loss}"
          + (f", valid loss {last['loss']:.4f}" if last else "")
          + (f", valid accuracy {last['accuracy']:.3f}" if last.get("accuracy") is not None else ""))
    checkpoints = out / "checkpoints"
    wrote = [str(out / "metrics.jsonl"), str(out / "final.safetensors")]
    if checkpoints.is_dir() and any(p.is_dir() for p in checkpoints.iterdir()):
        wrote.append(f"checkpoints in {checkpoints}")
    print(f"wrote {', '.join(wrote[:-1])} and {wrote[-1]}")
    return 0

"""``maccum train``: train a built-in task with accumulation and write metrics, checkpoints
and the final parameters."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import TASKS, load_task
from minitorch_accum.data import DataLoader
from minitorch_accum.optim import SGD, AdamW, Optimizer
from minitorch_accum.train import History, LearnerBuilder

__all__ = ["add_training_arguments", "make_optimizer", "run_training", "train_command"]


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", choices=TASKS, default="digits")
    parser.add_argument("--micro-batch", type=int, default=32, help="items per micro-batch (b)")
    parser.add_argument("--accum", type=int, default=8, help="micro-batches per optimizer step (k)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    parser.add_argument("--reduction", choices=("items", "mean", "sum"), default="items")
    parser.add_argument("--fusion", choices=("leaf", "gemm", "none"), default="gemm")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")


def make_optimizer(name: str, lr: float) -> Optimizer:
    return AdamW(lr=lr, weight_decay=0.0) if name == "adamw" else SGD(lr=lr, momentum=0.9)


def run_training(args: Any, out: Path, micro_batch: int, accum: int, progress: str, resume: bool = False,
                 checkpoint_every: int | None = None) -> History:
    """One training run of a built-in task; the same seed gives the same initial model and order."""
    if micro_batch <= 0:
        raise ValueError(f"--micro-batch must be positive, got {micro_batch}")
    if accum <= 0:
        raise ValueError(f"--accum (k) must be positive, got {accum}")
    manual_seed(args.seed)
    task = load_task(args.dataset, dtype=args.dtype)
    builder = (LearnerBuilder(out).num_epochs(args.epochs).grads_accumulation(accum).reduction(args.reduction)
               .fusion(args.fusion).accum_dtype("float64" if args.dtype == "float64" else "float32")
               .seed(args.seed).progress(progress).devices([args.device]))
    if checkpoint_every:
        builder = builder.with_file_checkpointer(every_steps=checkpoint_every)
    learner = builder.build(task.model, make_optimizer(args.optimizer, args.lr))
    train = DataLoader(task.train, micro_batch, shuffle=True, seed=args.seed)
    valid = DataLoader(task.valid, 512, shuffle=False)
    _, history = learner.fit(train, valid, resume=resume)
    return history


def train_command(args: Any) -> int:
    out = Path(args.out)
    history = run_training(args, out, args.micro_batch, args.accum, args.progress, resume=args.resume,
                           checkpoint_every=args.checkpoint_every)
    last = history.valid[-1] if history.valid else {}
    print(f"trained {len(history.steps)} optimizer steps; final train loss {history.final_loss:.4f}"
          + (f", valid loss {last['loss']:.4f}" if last else "")
          + (f", valid accuracy {last['accuracy']:.3f}" if last.get("accuracy") is not None else ""))
    print(f"wrote {out / 'metrics.jsonl'}, {out / 'final.safetensors'} and checkpoints in {out / 'checkpoints'}")
    return 0

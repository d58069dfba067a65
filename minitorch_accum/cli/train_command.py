"""``maccum train``: train a built-in task with accumulation and write metrics, checkpoints
and the final parameters; under ``mpiexec -n R`` it trains data-parallel on R ranks."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.data import DataLoader
from minitorch_accum.distributed.launch_environment import launched_world_size
from minitorch_accum.observe.chrome_trace import rank_trace_path
from minitorch_accum.optim import SGD, AdamW, Optimizer
from minitorch_accum.train import History, Learner, LearnerBuilder
from minitorch_accum.train.settings import for_learner

__all__ = ["build_run", "make_optimizer", "run_training", "train_command"]


def make_optimizer(name: str, lr: float) -> Optimizer:
    """The command line's optimizers: AdamW without weight decay, SGD with momentum 0.9."""
    return AdamW(lr=lr, weight_decay=0.0) if name == "adamw" else SGD(lr=lr, momentum=0.9)


def _rank_device(device: str) -> str:
    # data-parallel ranks on one host each take their own GPU
    local = os.environ.get("MPI_LOCALRANKID") or os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK")
    if device == "cuda" and local is not None:
        return f"cuda:{int(local)}"
    return device


def run_training(values: Mapping[str, Any]) -> History:
    """One training run of a built-in task from the values of the settings table, by row name
    (``train.settings.read_options``); the same seed gives the same initial model and order."""
    learner, train, valid = build_run(values)
    _, history = learner.fit(train, valid, resume=values["resume"], overwrite=values["overwrite"])
    return history


def build_run(values: Mapping[str, Any]) -> tuple[Learner, DataLoader, DataLoader]:
    """The Learner and the train and validation loaders of ``run_training`` (before fit)."""
    arena = values["accum_dtype"] or ("float64" if values["dtype"] == "float64" else "float32")
    if values["rounding"] == "stochastic" and arena != "bfloat16":
        raise ValueError(f"--rounding stochastic rounds a bfloat16 gradient arena; this run's is {arena}: add "
                         "--grad-dtype bfloat16")
    manual_seed(values["seed"])
    task = load_task(values["dataset"], dtype=values["dtype"], block_size=values["block_size"])
    micro_batch = values["micro_batch"]
    if micro_batch > len(task.train):
        print(f"warning: --micro-batch {micro_batch} is larger than the {len(task.train)} training items of "
              f"{values['dataset']}: every micro-batch holds the whole set", file=sys.stderr)
    learner_values = {**for_learner(values), "accum_dtype": arena,
                      "devices": [_rank_device(device) for device in values["devices"]]}
    learner = LearnerBuilder(values["out"]).settings(learner_values).build(
        task.model, make_optimizer(values["optimizer"], values["lr"]))
    train = DataLoader(task.train, micro_batch, shuffle=True, seed=values["seed"])
    valid = DataLoader(task.valid, 512, shuffle=False)
    return learner, train, valid


def train_command(values: Mapping[str, Any]) -> int:
    if values["resume"] and values["overwrite"]:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    if values["tui"]:
        from minitorch_accum.cli.monitor_command import monitor_unavailable, train_with_monitor

        why_not = monitor_unavailable()
        if why_not is None:
            history = train_with_monitor(values)
            if history is None:
                return 0  # stopped with q: said so, checkpointed
        else:
            print(f"maccum train: --tui {why_not}; showing the plain progress instead", file=sys.stderr)
            history = run_training({**values, "progress": "plain"})
    else:
        history = run_training(values)
    if history.rank != 0:
        return 0  # rank 0 reports for the job
    last = history.valid[-1] if history.valid else {}
    final_loss = "-" if history.final_loss is None else f"{history.final_loss:.4f}"
    print(f"trained {len(history.steps)} optimizer steps; final train loss {final_loss}"
          + (f", valid loss {last['loss']:.4f}" if last else "")
          + (f", valid accuracy {last['accuracy']:.3f}" if last.get("accuracy") is not None else ""))
    out = Path(values["out"])
    checkpoints = out / "checkpoints"
    wrote = [str(out / "metrics.jsonl"), str(out / "final.safetensors")]
    if checkpoints.is_dir() and any(p.is_dir() for p in checkpoints.iterdir()):
        wrote.append(f"checkpoints in {checkpoints}")
    if values["trace_out"] is not None:
        ranks = launched_world_size()
        trace = rank_trace_path(values["trace_out"], 0, ranks)
        wrote.append(f"the trace {trace}" + (f" (and one per rank beside it, {ranks} in all)" if ranks > 1 else "")
                     + " (open it in ui.perfetto.dev)")
    print(f"wrote {', '.join(wrote[:-1])} and {wrote[-1]}")
    return 0

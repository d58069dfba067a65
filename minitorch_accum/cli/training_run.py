"""A training run of a built-in task, built from the values of the settings table: its data, its
model, its optimizer and the Learner (``maccum train``, its terminal monitor and ``maccum compare``
build their runs here)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.data import DataLoader
from minitorch_accum.optim import SGD, AdamW, Optimizer
from minitorch_accum.train import History, Learner
from minitorch_accum.train.settings import learner_config

__all__ = ["build_run", "make_optimizer", "resume_hint", "run_training"]


def make_optimizer(name: str, lr: float) -> Optimizer:
    """The command line's optimizers: AdamW without weight decay, SGD with momentum 0.9."""
    return AdamW(lr=lr, weight_decay=0.0) if name == "adamw" else SGD(lr=lr, momentum=0.9)


def resume_hint(out: str | os.PathLike[str], ranks: int) -> str:
    """What a stopped run's line says of going on: the command that resumes it, every other option taken
    from the run's checkpoint (``train/recorded_options.py``)."""
    command = f"maccum train --resume --out {shlex.quote(str(out))}"
    return f"continue with {command}" + (f", launched as this run was (mpiexec -n {ranks} ...)" if ranks > 1 else "")


def _rank_device(device: str) -> str:
    """Data-parallel ranks on one host each take their own GPU: ``--device cuda`` (read as
    ``cuda:0``) is the local rank's GPU under mpiexec (two ranks cannot share one GPU's NCCL
    communicator anyway); another GPU named, or the CPU, stays as given."""
    local = os.environ.get("MPI_LOCALRANKID") or os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK")
    if device in ("cuda", "cuda:0") and local is not None:
        return f"cuda:{int(local)}"
    return device


def run_training(values: Mapping[str, Any]) -> History:
    """One training run of a built-in task from the values of the settings table, by row name
    (``train.settings.read_options``); the same seed gives the same initial model and order."""
    learner, train, valid = build_run(values)
    _, history = learner.fit(train, valid, resume=values["resume"], overwrite=values["overwrite"])
    return history


def build_run(values: Mapping[str, Any]) -> tuple[Learner, DataLoader, DataLoader]:
    """The Learner and the train and validation loaders of ``run_training`` (before fit); ``values``
    are checked (``read_options``), so the Learner's configuration is made of them as they are."""
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
    config = learner_config(values["out"], {
        **values, "accum_dtype": arena,
        "devices": tuple(_rank_device(device) for device in values["devices"])})
    learner = Learner(task.model, make_optimizer(values["optimizer"], values["lr"]), config)
    learner.resume_hint = resume_hint(values["out"], learner.world_size)
    train = DataLoader(task.train, micro_batch, shuffle=True, seed=values["seed"])
    valid = DataLoader(task.valid, 512, shuffle=False)
    return learner, train, valid

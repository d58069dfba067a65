"""The parts of one Learner's run that its helpers use: where it writes, its configuration, the
models, the optimizer (and what steps it: itself, or ZeRO-1 over it), the accumulator and the
communicator. The helpers beside the loop (checkpoints and resume, their checks, the memory plan,
the ranks' agreement) take this, not the Learner: none of them imports ``learner.py``, and what
each reads of a run is said here; the loop's own state (its step, the open window's sums) is
handed to them in each call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from minitorch_accum.accum import Accumulator
from minitorch_accum.distributed import Communicator
from minitorch_accum.distributed.zero import ZeroRedundancyOptimizer
from minitorch_accum.nn import Module
from minitorch_accum.optim import Optimizer
from minitorch_accum.train.settings import LearnerConfig

__all__ = ["RunParts"]


@dataclass(frozen=True)
class RunParts:
    """What one Learner's run is made of (the objects themselves, shared with the Learner); its rank
    and the number of ranks are the communicator's (rank 0 writes the run's files)."""

    directory: Path
    config: LearnerConfig
    #: the user's model (``final.safetensors`` holds its parameters), and what trains: it, or a Classifier of it
    model: Module
    step_model: Module
    optimizer: Optimizer
    #: what steps the parameters: the optimizer, or ZeRO-1 stepping this rank's shard with it
    stepper: Optimizer | ZeroRedundancyOptimizer
    accumulator: Accumulator
    comm: Communicator

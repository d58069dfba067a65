"""Training: the Learner and its builder, the step protocol, metrics, checkpoints, progress."""

from minitorch_accum.train.builder import LearnerBuilder
from minitorch_accum.train.checkpoint import (
    CheckpointError,
    CheckpointFallbackWarning,
    FileCheckpointer,
    LoadedCheckpoint,
)
from minitorch_accum.train.learner import DistributedConfig, History, Learner, LearnerConfig
from minitorch_accum.train.memory_budget import MemoryBudgetError, MemoryPlan
from minitorch_accum.train.metrics import MetricsLogError
from minitorch_accum.train.run_directory import RunDirectoryError, check_run_directory
from minitorch_accum.train.run_lock import RunLock, RunLockedError
from minitorch_accum.train.run_settings import SettingsMismatchError
from minitorch_accum.train.step import Classifier, TrainOutput, ValidOutput
from minitorch_accum.train.stop_request import TrainingInterrupted

__all__ = [
    "CheckpointError",
    "CheckpointFallbackWarning",
    "Classifier",
    "DistributedConfig",
    "FileCheckpointer",
    "History",
    "Learner",
    "LearnerBuilder",
    "LearnerConfig",
    "LoadedCheckpoint",
    "MemoryBudgetError",
    "MemoryPlan",
    "MetricsLogError",
    "RunDirectoryError",
    "RunLock",
    "RunLockedError",
    "SettingsMismatchError",
    "TrainOutput",
    "TrainingInterrupted",
    "ValidOutput",
    "check_run_directory",
]

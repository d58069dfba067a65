"""Training: the Learner and its builder, the settings table, the step protocol, metrics,
checkpoints, progress."""

from minitorch_accum.train.builder import LearnerBuilder
from minitorch_accum.train.callbacks import Callback
from minitorch_accum.train.checkpoint import (
    CheckpointError,
    CheckpointFallbackWarning,
    FileCheckpointer,
    LoadedCheckpoint,
)
from minitorch_accum.train.history import History
from minitorch_accum.train.learner import Learner
from minitorch_accum.train.memory_budget import MemoryBudgetError, MemoryPlan
from minitorch_accum.train.metrics import MetricsLogError
from minitorch_accum.train.run_directory import RunCompleteError, RunDirectoryError, check_run_directory
from minitorch_accum.train.run_lock import RunLock, RunLockedError
from minitorch_accum.train.run_settings import SettingsMismatchError
from minitorch_accum.train.settings import SETTINGS, LearnerConfig, Setting
from minitorch_accum.train.step import Classifier, TrainOutput, ValidOutput
from minitorch_accum.train.stop_request import StopRequest, TrainingAborted, TrainingInterrupted

__all__ = [
    "SETTINGS",
    "Callback",
    "CheckpointError",
    "CheckpointFallbackWarning",
    "Classifier",
    "FileCheckpointer",
    "History",
    "Learner",
    "LearnerBuilder",
    "LearnerConfig",
    "LoadedCheckpoint",
    "MemoryBudgetError",
    "MemoryPlan",
    "MetricsLogError",
    "RunCompleteError",
    "RunDirectoryError",
    "RunLock",
    "RunLockedError",
    "Setting",
    "SettingsMismatchError",
    "StopRequest",
    "TrainOutput",
    "TrainingAborted",
    "TrainingInterrupted",
    "ValidOutput",
    "check_run_directory",
]

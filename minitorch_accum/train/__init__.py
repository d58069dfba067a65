"""Training: the Learner and its builder, the step protocol, metrics, checkpoints, progress."""

from minitorch_accum.train.builder import LearnerBuilder
from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer
from minitorch_accum.train.learner import DistributedConfig, History, Learner, LearnerConfig
from minitorch_accum.train.memory_budget import MemoryBudgetError, MemoryPlan
from minitorch_accum.train.run_settings import SettingsMismatchError
from minitorch_accum.train.step import Classifier, TrainOutput, ValidOutput
from minitorch_accum.train.stop_request import TrainingInterrupted

__all__ = [
    "CheckpointError",
    "Classifier",
    "DistributedConfig",
    "FileCheckpointer",
    "History",
    "Learner",
    "LearnerBuilder",
    "LearnerConfig",
    "MemoryBudgetError",
    "MemoryPlan",
    "SettingsMismatchError",
    "TrainOutput",
    "TrainingInterrupted",
    "ValidOutput",
]

"""Callbacks the Learner calls once per optimizer step, so a user can watch or snapshot a run
without subclassing the optimizer or the Learner.

    class Snapshot(Callback):
        def __init__(self): self.records = []
        def on_step_end(self, learner, record):
            self.records.append({n: p.numpy().copy() for n, p in learner.model.named_parameters()})

    LearnerBuilder(dir).callback(Snapshot())              # an object with on_step_end
    LearnerBuilder(dir).on_step_end(lambda learner, record: print(record["loss"]))

``on_step_end(learner, record)`` runs after every optimizer step (a skipped, non-finite step
included: ``record["skipped"]``), once the parameters are updated and ``record`` (the line
``metrics.jsonl`` gets) is in ``learner.history``, before any checkpoint of that step. It runs on
every rank of a data-parallel run: every rank holds the same parameters and the same record
(its totals are summed over the ranks), so a callback may itself take part in a collective;
one that writes files should do so when ``learner.is_main``. An exception it raises stops
training there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Callback", "StepEndFunction", "check_callback"]


class Callback:
    """Base class of Learner callbacks: override the hooks you need (each does nothing here)."""

    def on_step_end(self, learner: Any, record: dict[str, Any]) -> None:
        """After each optimizer step: the Learner, and the step's metrics record."""


class StepEndFunction(Callback):
    """A plain function ``fn(learner, record)`` as an ``on_step_end`` callback."""

    def __init__(self, fn: Callable[[Any, dict[str, Any]], Any]) -> None:
        if not callable(fn):
            raise TypeError(f"on_step_end expects a function (learner, record), got {type(fn).__name__}")
        self.fn = fn

    def on_step_end(self, learner: Any, record: dict[str, Any]) -> None:
        self.fn(learner, record)

    def __repr__(self) -> str:
        return f"StepEndFunction({getattr(self.fn, '__qualname__', self.fn)!r})"


def check_callback(callback: Any) -> Any:
    """``callback`` if it has a callable ``on_step_end``; a TypeError saying what it lacks otherwise."""
    if not callable(getattr(callback, "on_step_end", None)):
        raise TypeError(f"callback expects an object with an on_step_end(learner, record) method, got "
                        f"{type(callback).__name__}; pass a function with .on_step_end(fn)")
    return callback

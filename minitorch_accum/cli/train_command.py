"""``maccum train``: train a built-in task with accumulation and write metrics, checkpoints
and the final parameters; under ``mpiexec -n R`` it trains data-parallel on R ranks. ``--resume``
rebuilds the run in ``--out`` from what its checkpoint recorded, the options typed over it
(``train/recorded_options.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minitorch_accum.cli.monitor_command import monitor_unavailable, train_with_monitor
from minitorch_accum.cli.training_run import build_run
from minitorch_accum.distributed.launch import make_communicator
from minitorch_accum.distributed.launch_environment import launched_world_size
from minitorch_accum.observe.chrome_trace import rank_trace_path
from minitorch_accum.train import History, RunCompleteError, StopRequest
from minitorch_accum.train.progress import write_line
from minitorch_accum.train.recorded_options import read_recorded_options, resumed_options

__all__ = ["train_command"]


def train_command(values: Mapping[str, Any], typed: frozenset[str]) -> int:
    """Train as ``values`` say (``typed``: the options the user gave; a resume takes the others from its run)."""
    if values["resume"] and values["overwrite"]:
        raise ValueError("--resume continues the run in --out and --overwrite replaces it: give one of them")
    # SIGINT and SIGTERM are caught from here to the last line printed: one before fit stops it at its
    # first safe point with a checkpoint, one after it is complete exits with its status (130, 143)
    with StopRequest().installed() as stop:
        try:
            history = _train(values, typed, stop)
        except RunCompleteError as complete:
            if complete.rank == 0:
                print(f"maccum train: {complete}")
            return 0
        if history is None:
            return 0  # stopped with q in the terminal monitor: said so, checkpointed
        if history.rank == 0:
            _report(values, history)
        if stop.signal is not None:
            write_line(f"maccum train: signal {stop.signal} came after the run completed ({len(history.steps)} "
                       f"optimizer steps); {Path(values['out']) / 'final.safetensors'} is written: the run is "
                       "complete, nothing to resume")
            return 128 + stop.signal
    return 0


def _train(values: Mapping[str, Any], typed: frozenset[str], stop: StopRequest) -> History | None:
    if values["pace"] is not None and not values["tui"]:
        raise ValueError("--pace slows the terminal monitor down to be watched: give it with --tui")
    if values["resume"]:
        values = _as_recorded(values, typed)
    if values["tui"]:
        why_not = monitor_unavailable()
        if why_not is None:
            return train_with_monitor(values)
        write_line(f"maccum train: --tui {why_not}; showing the plain progress instead")
        values = {**values, "progress": "plain"}
    learner, train, valid = build_run(values)
    learner.stop_request = stop  # a signal caught while the run was built stops fit at its first safe point
    _, history = learner.fit(train, valid, resume=values["resume"], overwrite=values["overwrite"])
    return history


def _as_recorded(values: Mapping[str, Any], typed: frozenset[str]) -> dict[str, Any]:
    """The values of a resume: the run's recorded options, the typed ones over them (one line says a
    typed change of the epochs); every rank gets rank 0's reading of the directory."""
    comm = make_communicator("auto")
    epochs = values["num_epochs"] if "num_epochs" in typed else None
    resumed, said = resumed_options(values, typed, read_recorded_options(values["out"], comm, epochs))
    if said is not None and comm.rank == 0:
        print(f"maccum train: {said}", flush=True)
    return resumed


def _report(values: Mapping[str, Any], history: History) -> None:
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

"""Trials of a real ``maccum train`` that gets Ctrl-C twice at random moments: it must never crash,
and every checkpoint it leaves must verify, hold a consistent window and resume bit for bit.

One trial: start ``maccum train`` on the digits MLP (micro-batches of 64, k = 3, a checkpoint every
2 steps, many epochs), wait for training to start, send SIGINT after 0-0.5 s and again 0.05-100
ms later, and read the outcome: no temporary file or directory may be left. Then each checkpoint
left behind is loaded (verified), its window checked (the accumulator's micro-batches and items
equal the window's, and the items are those of the micro-batches before its position), and the
run resumed from it in a copy for the rest of that epoch: the final parameters must equal an
uninterrupted run's, bit for bit.

    python -m tests.train.interrupt_trials --trials 50 [--seed 0] [--out DIR]

prints the counts and writes ``DIR/interrupt_trials.json``; the suite runs two trials.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import minitorch_accum

REPOSITORY = Path(minitorch_accum.__file__).resolve().parents[1]
MICRO_BATCH = 64
TRAIN = ("train", "--dataset", "digits", "--accum", "3", "--micro-batch", str(MICRO_BATCH),
         "--checkpoint-every", "2", "--seed", "0")
# what only a crash leaves on stderr
CRASH_MARKS = ("Exception ignored", "Segmentation fault", "free(): ", "Fatal Python error", "core dumped")


@dataclass
class TrialResult:
    """What one trial did and found."""

    first_delay: float
    second_delay: float
    returncode: int | None = None
    outcome: str = ""
    training_seconds: float = 0.0
    checkpoints: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    crashed: bool = False
    stderr_tail: str = ""

    @property
    def inconsistent(self) -> bool:
        return bool(self.problems)

    def describe(self) -> str:
        return (f"outcome {self.outcome!r} (exit {self.returncode}) after {self.first_delay:.3f} s + "
                f"{self.second_delay:.3f} s; checkpoints {self.checkpoints}; problems {self.problems}; "
                f"stderr: {self.stderr_tail!r}")


def _train_items() -> int:
    from minitorch_accum.cli.tasks import load_task

    return len(load_task("digits", dtype="float32", block_size=None).train)


_ITEMS: list[int] = []


def _micro_batch_sizes(count: int) -> list[int]:
    if not _ITEMS:
        _ITEMS.append(_train_items())
    items = _ITEMS[0]
    return [min(MICRO_BATCH, items - MICRO_BATCH * i) for i in range(-(-items // MICRO_BATCH))][:count]


def _cli(arguments: list[str]) -> tuple[int, str]:
    """``maccum`` in this process: its exit status and what it wrote on stderr."""
    from minitorch_accum.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        status = main(arguments)
    return status, err.getvalue()


def _parameters(run: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(run / "final.safetensors")


def _reference(root: Path, epochs: int) -> dict[str, np.ndarray]:
    """The final parameters of an uninterrupted run of ``epochs`` epochs (run once per root)."""
    run = root / f"reference-{epochs}"
    if not (run / "final.safetensors").exists():
        status, err = _cli([*TRAIN, "--epochs", str(epochs), "--progress", "none", "--out", str(run)])
        if status != 0:
            raise RuntimeError(f"the reference run failed: {err}")
    return _parameters(run)


def check_checkpoint(run: Path, name: str, scratch: Path, references: Path) -> list[str]:
    """What is wrong with checkpoint ``name`` of ``run``: it must verify, hold a consistent
    window and resume, in a copy, to the parameters of an uninterrupted run."""
    from minitorch_accum.train import CheckpointError, FileCheckpointer

    try:
        _, state = FileCheckpointer(run / "checkpoints").load(run / "checkpoints" / name)
    except CheckpointError as error:
        return [f"{name} does not verify: {error}"]
    window, accumulator = state["window"], state["accumulator"]
    micro, next_batch, epoch = accumulator["micro_step"], state["next_batch"], state["epoch"]
    problems = []
    expected = sum(_micro_batch_sizes(next_batch)[next_batch - micro:])
    if not (window["micro"] == micro and window["items"] == accumulator["items"] == expected):
        problems.append(f"{name}: window of {window['micro']} micro-batches, {window['items']} items; accumulator "
                        f"{micro} micro-batches, {accumulator['items']} items; its micro-batches hold {expected}")
    epochs = epoch + 1 + (next_batch >= len(_micro_batch_sizes(10**9)))
    copy = scratch / f"resume-{name}"
    shutil.copytree(run, copy)
    (copy / "checkpoints" / "latest").write_text(name + "\n")
    status, err = _cli([*TRAIN, "--epochs", str(epochs), "--progress", "none", "--out", str(copy), "--resume"])
    if status != 0:
        return [*problems, f"{name} does not resume: {err.strip()}"]
    reference = _reference(references, epochs)
    resumed = _parameters(copy)
    if any(not np.array_equal(resumed[key], reference[key]) for key in reference):
        problems.append(f"{name} resumes to other parameters than an uninterrupted run of {epochs} epoch(s)")
    return problems


def _outcome(returncode: int, err: str) -> tuple[str, bool]:
    if any(mark in err for mark in CRASH_MARKS):
        return "crash", True
    if returncode == 130:
        if "stopped at once by a second Ctrl-C" in err:
            return "stopped at once", False
        if "interrupted by signal 2 after optimizer step" in err and "; saved" in err:
            return "saved, second ignored" if "Ctrl-C again: ignored" in err else "saved", False
        # a plain KeyboardInterrupt: the default handler's (before fit set its own, or after), or,
        # before TrainingAborted, the second Ctrl-C's
        return "KeyboardInterrupt, no word from fit", False
    if returncode == -signal.SIGINT:
        return "ended by SIGINT after the command returned", False
    return f"exit {returncode}", True


def run_trial(directory: Path, rng: np.random.Generator, references: Path | None = None,
              after_checkpoint: bool = False) -> TrialResult:
    """One trial in ``directory`` (created); ``references`` holds the uninterrupted runs (reused).
    ``after_checkpoint``: the first Ctrl-C waits for the run's first checkpoint (so the trial has
    one to check however slow the machine is)."""
    directory.mkdir(parents=True, exist_ok=True)
    references = references or directory
    # the second press log-uniform in 0.05-100 ms: as often inside the micro-batch (a few ms) as in
    # the save that follows it or after
    result = TrialResult(first_delay=float(rng.uniform(0.0, 0.5)),
                         second_delay=float(np.exp(rng.uniform(np.log(5e-5), np.log(0.1)))))
    run = directory / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPOSITORY), os.environ.get("PYTHONPATH"))
                                                       if p)}
    process = subprocess.Popen([sys.executable, "-m", "minitorch_accum.cli", *TRAIN, "--epochs", "1000",
                                "--progress", "plain", "--out", str(run)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    started_line = process.stdout.readline()  # "training (...): N optimizer steps": the loop starts
    started = time.perf_counter()
    if started_line.startswith("training"):
        deadline = time.perf_counter() + 120
        while after_checkpoint and not (run / "checkpoints" / "latest").exists() and time.perf_counter() < deadline:
            time.sleep(0.01)
        time.sleep(result.first_delay)
        result.training_seconds = time.perf_counter() - started
        process.send_signal(signal.SIGINT)
        time.sleep(result.second_delay)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
        result.outcome, result.crashed = "hung", True
    result.returncode = process.returncode
    result.stderr_tail = err[-600:]
    if not result.outcome:
        result.outcome, result.crashed = _outcome(process.returncode, err)
    from minitorch_accum.train import FileCheckpointer

    result.checkpoints = sorted(path.name for path in FileCheckpointer(run / "checkpoints").checkpoints())
    # a stop at once removes what its save had half-written (a temporary directory, a superseded one half-removed)
    left = [path.name for folder in (run, run / "checkpoints") if folder.is_dir() for path in folder.iterdir()
            if ".tmp" in path.name or ".del-" in path.name]
    if left:
        result.problems.append(f"left behind: {left}")
    for name in result.checkpoints:
        result.problems += check_checkpoint(run, name, directory, references)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="where the JSON goes (default: a temporary directory)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="interrupt-trials-"))
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    results, wall = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for trial in range(args.trials):
            begun = time.perf_counter()
            result = run_trial(Path(scratch) / f"trial{trial}", rng, references=Path(scratch))
            wall.append(time.perf_counter() - begun)
            results.append(result)
            print(f"trial {trial:2d}: {result.outcome:40s} {len(result.checkpoints)} checkpoint(s)"
                  + (f"  PROBLEMS: {result.problems}" if result.problems else "")
                  + ("  CRASH: " + result.stderr_tail if result.crashed else ""), flush=True)
    outcomes: dict[str, int] = {}
    for result in results:
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
    training = [r.training_seconds for r in results]
    summary = {
        "trials": len(results), "crashes": sum(r.crashed for r in results),
        "inconsistent_trials": sum(r.inconsistent for r in results),
        "checkpoints_checked": sum(len(r.checkpoints) for r in results), "outcomes": outcomes,
        "training_seconds_mean": float(np.mean(training)), "training_seconds_max": float(np.max(training)),
        "wall_seconds_per_trial_mean": float(np.mean(wall)), "wall_seconds_total": float(np.sum(wall)),
        "results": [asdict(r) for r in results],
    }
    (out / "interrupt_trials.json").write_text(json.dumps(summary, indent=1))
    print(f"{summary['trials']} trials: {summary['crashes']} crashes, {summary['inconsistent_trials']} with an "
          f"inconsistent checkpoint ({summary['checkpoints_checked']} checked); outcomes {outcomes}; training "
          f"before the first Ctrl-C {summary['training_seconds_mean']:.2f} s on average (max "
          f"{summary['training_seconds_max']:.2f}); {summary['wall_seconds_per_trial_mean']:.1f} s per trial; "
          f"{out / 'interrupt_trials.json'}")
    return 0 if summary["crashes"] == 0 and summary["inconsistent_trials"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

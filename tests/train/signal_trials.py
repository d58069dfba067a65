"""Trials of a whole short ``maccum train`` that gets SIGINT or SIGTERM at a random instant: every run
must end complete or resumable, never lost, with exit status 0, 130 or 143 and one line saying why.

One trial: start the run (the digits MLP in float64, 2 epochs of 23 micro-batches of 64, k = 2, a
checkpoint every 4 steps or none), wait until it catches SIGTERM (``maccum train`` does from its first
line), send SIGINT or SIGTERM after a delay drawn uniformly between 0 and the length of an uninterrupted
run, and read what is left:

- complete: ``final.safetensors`` records a finished run, ``--resume`` says "is complete", and the
  parameters are the uninterrupted run's, bit for bit;
- resumable: ``--resume`` finishes the run, on the uninterrupted run's parameters (bit for bit in one
  process; a run of 2 ranks is resumed in one process, which adds its partial sums in another order:
  within 1e-12);
- lost: neither. Also a problem: another exit status, a traceback, mpiexec's "BAD TERMINATION", no
  line from the library on a stop, or a temporary file or directory left behind.

One process: the runs are forked from this process, which has imported the library (no interpreter
to start), two at a time. Two ranks: ``mpiexec -n 2``, the signal to rank 0 or rank 1.

    python -m tests.train.signal_trials --trials 50 [--ranks 1|2] [--parallel 2] [--seed 0]

prints the outcomes; the suite runs ``MTA_SIGNAL_TRIALS`` trials of each (default 50 of one process,
10 of two ranks).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import minitorch_accum

REPOSITORY = Path(minitorch_accum.__file__).resolve().parents[1]
TRAIN = ["train", "--dataset", "digits", "--dtype", "float64", "--micro-batch", "64", "--epochs", "2",
         "--progress", "none", "--seed", "0", "--threads", "1"]
# the same windows of 2 micro-batches: k = 2 in one process, k = 1 on each of 2 ranks
ACCUM = {1: ["--accum", "2"], 2: ["--accum", "1"]}
EXIT_STATUSES = (0, 128 + signal.SIGINT, 128 + signal.SIGTERM)
HANG_SECONDS = 60
# what only a crash or an unhandled exit shows
CRASH_MARKS = ("Traceback", "BAD TERMINATION", "Exception ignored", "Segmentation fault", "Fatal Python error")


@dataclass
class Trial:
    """One trial's draw and what it found."""

    number: int
    ranks: int
    signum: int
    target: int  # the rank signalled
    fraction: float  # the delay as a fraction of an uninterrupted run
    checkpoint_every: int
    delay: float = 0.0
    signalled: bool = False  # the run had not ended when the signal was sent
    status: int | None = None
    outcome: str = ""  # complete, resumable or lost
    problems: list[str] = field(default_factory=list)
    stderr: str = ""

    @property
    def arguments(self) -> list[str]:
        return [*TRAIN, *ACCUM[self.ranks], "--checkpoint-every", str(self.checkpoint_every)]


def draw_trials(count: int, ranks: int, seed: int) -> list[Trial]:
    rng = random.Random(seed * 1000 + ranks)
    return [Trial(number, ranks, (signal.SIGINT, signal.SIGTERM)[number % 2], (number // 2) % ranks,
                  rng.random(), (0, 4)[(number // 4) % 2]) for number in range(count)]


def _catches_sigterm(pid: int) -> bool:
    """Whether ``pid`` has a handler for SIGTERM (``maccum train`` installs one on its first line)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def _wait_until(condition, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the run did not start catching signals")
        time.sleep(0.001)


# ---------------------------------------------------------------- one process, forked
def _fork_run(arguments: list[str], out: Path, log: Path) -> int:
    """``maccum train`` in a child forked from this process, its output in ``log``.{out,err}."""
    pid = os.fork()
    if pid:
        return pid
    status = 70
    try:
        os.environ["MTA_THREADS"] = "1"
        with open(f"{log}.out", "w") as stdout, open(f"{log}.err", "w") as stderr:
            os.dup2(stdout.fileno(), 1)
            os.dup2(stderr.fileno(), 2)
            sys.stdout, sys.stderr = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False)), \
                io.TextIOWrapper(os.fdopen(2, "wb", closefd=False))
            from minitorch_accum.cli.main import main

            status = main([*arguments, "--out", str(out)])
            for signum in (signal.SIGINT, signal.SIGTERM):  # as python -m minitorch_accum.cli does on its way out
                signal.signal(signum, signal.SIG_IGN)
            sys.stdout.flush()
            sys.stderr.flush()
    except BaseException:  # the harness's own failure: said in the log, a status no run gives
        with contextlib.suppress(Exception):
            traceback.print_exc()
            sys.stderr.flush()
    finally:
        os._exit(status)


def _one_process_run(trial: Trial | None, arguments: list[str], out: Path, length: float) -> tuple[int, str, float]:
    """Run, signal at ``trial.fraction * length`` seconds after the run catches signals (never when
    ``trial`` is None); (exit status, stderr, seconds from catching to exit)."""
    log = out.parent / f"{out.name}-log"
    pid = _fork_run(arguments, out, log)
    try:
        _wait_until(lambda: _catches_sigterm(pid), 30)
        started = time.monotonic()
        done = 0
        if trial is not None:
            trial.delay = trial.fraction * length
            time.sleep(trial.delay)
            done, status = os.waitpid(pid, os.WNOHANG)
            trial.signalled = not done
            if not done:
                os.kill(pid, trial.signum)
        deadline = time.monotonic() + HANG_SECONDS
        while not done:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return -1, "hung", 0.0
            time.sleep(0.002)
        seconds = time.monotonic() - started
    except BaseException:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status), Path(f"{log}.err").read_text(), seconds


# ---------------------------------------------------------------- two ranks, mpiexec
def _mpiexec() -> str:
    found = Path(sys.executable).with_name("mpiexec")
    return str(found) if found.exists() else "mpiexec"


def _two_rank_run(trial: Trial | None, arguments: list[str], out: Path, length: float) -> tuple[int, str, float]:
    from tests.distributed.rank_processes import wait_for_ranks

    command = [_mpiexec(), "-n", "2", "-prepend-rank", sys.executable, "-m", "mpi4py", "-m", "minitorch_accum.cli",
               *arguments, "--out", str(out)]
    env = {**os.environ, "MTA_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPOSITORY), os.environ.get("PYTHONPATH")) if p)}
    job = subprocess.Popen(command, cwd=REPOSITORY, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        ranks = wait_for_ranks(job.pid, 2, timeout=60)
        _wait_until(lambda: all(_catches_sigterm(pid) for pid in ranks.values()) or job.poll() is not None, 60)
        started = time.monotonic()
        if trial is not None:
            trial.delay = trial.fraction * length
            time.sleep(trial.delay)
            trial.signalled = job.poll() is None
            with contextlib.suppress(ProcessLookupError):
                os.kill(ranks[trial.target], trial.signum)
        try:
            output, _ = job.communicate(timeout=HANG_SECONDS)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
            return -1, "hung\n" + output, 0.0
        return job.returncode, output, time.monotonic() - started
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()


# ---------------------------------------------------------------- the checks
def _cli(arguments: list[str]) -> tuple[int, str]:
    """``maccum`` in this process: its status and what it printed."""
    from minitorch_accum.cli.main import main

    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
        status = main(arguments)
    return status, text.getvalue()


def _parameters(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(path)


def _leftovers(out: Path) -> list[str]:
    names = [p.name for p in out.iterdir()] if out.is_dir() else []
    names += [f"checkpoints/{p.name}" for p in (out / "checkpoints").iterdir()] if (out / "checkpoints").is_dir() \
        else []
    return [name for name in names if ".tmp" in name or ".del-" in name]


def _library_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "maccum train: " in line]


def check_trial(trial: Trial, out: Path, status: int, stderr: str, reference: dict[str, np.ndarray]) -> None:
    """Classify what ``trial`` left in ``out`` and list its problems (on the trial)."""
    from minitorch_accum.train.resume import FINAL, read_final_record

    trial.status, trial.stderr = status, stderr[-1500:]
    if status not in EXIT_STATUSES:
        trial.problems.append(f"exit status {status}")
    marks = [mark for mark in CRASH_MARKS if mark in stderr]
    if marks:
        trial.problems.append(f"the output shows {marks}")
    lines = _library_lines(stderr)
    if status != 0 and not lines:
        trial.problems.append(f"exit status {status} without a line from the library")
    if trial.ranks == 1 and status != 0 and len(stderr.strip().splitlines()) != 1:
        trial.problems.append(f"{len(stderr.strip().splitlines())} lines on stderr, not one")
    left = _leftovers(out)
    if left:
        trial.problems.append(f"left behind: {left}")
    final = read_final_record(out / FINAL)
    if final is not None:
        trial.outcome = "complete"
        resumed, said = _cli([*trial.arguments, "--out", str(out), "--resume"])
        if resumed != 0 or "is complete" not in said:
            trial.problems.append(f"a complete run's --resume exits {resumed}: {said.strip()[-300:]}")
        got = _parameters(out / FINAL)
        if any(not np.array_equal(got[name], reference[name]) for name in reference):
            trial.problems.append("the complete run's parameters are not the uninterrupted run's")
        if any("saved" in line and "completed" not in line for line in lines):
            trial.problems.append("a stop that said it saved a checkpoint left a complete run")
        return
    if status == 0:
        trial.problems.append("exit status 0 without a complete run")
    resumed, said = _cli([*trial.arguments, "--out", str(out), "--resume"])
    if resumed != 0 or read_final_record(out / FINAL) is None:
        trial.outcome = "lost"
        trial.problems.append(f"--resume exits {resumed}: {said.strip()[-400:]}")
        return
    trial.outcome = "resumable"
    got = _parameters(out / FINAL)
    for name in reference:
        same = np.array_equal(got[name], reference[name]) if trial.ranks == 1 else \
            np.allclose(got[name], reference[name], rtol=1e-12, atol=1e-12)
        if not same:
            trial.problems.append(f"resumed to other parameters than the uninterrupted run ({name})")
            break


def _run(trial: Trial | None, ranks: int, arguments: list[str], out: Path, length: float) -> tuple[int, str, float]:
    return (_one_process_run if ranks == 1 else _two_rank_run)(trial, arguments, out, length)


def warm_up(root: Path) -> None:
    """One run in this process, so that the forked runs find every module imported and the data
    read (each then trains in ~50 ms instead of importing for ~1 s)."""
    arguments = [argument for argument in TRAIN if argument not in ("--threads", "1")]  # this process's pools stay
    status, said = _cli([*arguments, *ACCUM[1], "--checkpoint-every", "0", "--out", str(root / "warm-up")])
    if status != 0:
        raise RuntimeError(f"the warm-up run exits {status}: {said[-2000:]}")


def reference_run(root: Path, ranks: int, parallel: int) -> tuple[dict[str, np.ndarray], float]:
    """The parameters of an uninterrupted run and its length from catching signals to exit (seconds),
    the longest of ``parallel`` runs at once (the trials' load, so their instants reach their end)."""
    if ranks == 1:
        warm_up(root)
    arguments = [*TRAIN, *ACCUM[ranks], "--checkpoint-every", "0"]
    workers = {}
    for copy in range(parallel):
        out, result = root / f"reference-{ranks}-{copy}", root / f"reference-{ranks}-{copy}.json"
        pid = os.fork()
        if pid == 0:
            try:
                result.write_text(json.dumps(_run(None, ranks, arguments, out, 0.0)))
            finally:
                os._exit(0)
        workers[pid] = result
    lengths = []
    for pid, result in workers.items():
        os.waitpid(pid, 0)
        status, output, seconds = json.loads(result.read_text())
        if status != 0:
            raise RuntimeError(f"the uninterrupted run of {ranks} rank(s) exits {status}: {output[-2000:]}")
        lengths.append(seconds)
    return _parameters(root / f"reference-{ranks}-0" / "final.safetensors"), max(lengths)


def _trial_in_child(trial: Trial, root: Path, length: float, reference_file: Path, result: Path) -> None:
    """One whole trial in a forked worker; its Trial written to ``result`` as JSON."""
    try:
        reference = _parameters(reference_file)
        out = root / f"trial{trial.ranks}-{trial.number}"
        status, stderr, _ = _run(trial, trial.ranks, trial.arguments, out, length)
        check_trial(trial, out, status, stderr, reference)
        shutil.rmtree(out, ignore_errors=True)
    except BaseException:
        trial.outcome = "harness error"
        trial.problems.append(traceback.format_exc()[-1500:])
    result.write_text(json.dumps(asdict(trial)))


def _wait_any(pids: list[int]) -> int:
    """Reap one of ``pids`` once it has ended; its pid."""
    while True:
        for pid in pids:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return pid
        time.sleep(0.005)


def run_trials(trials: list[Trial], root: Path, parallel: int = 2) -> list[Trial]:
    """Run ``trials`` (all of one number of ranks), ``parallel`` at a time, each in a forked worker."""
    if not trials:
        return []
    ranks = trials[0].ranks
    reference, length = reference_run(root, ranks, parallel)
    reference_file = root / f"reference-{ranks}-0" / "final.safetensors"
    assert reference
    pending, running, done = list(trials), {}, []
    while pending or running:
        while pending and len(running) < parallel:
            trial = pending.pop(0)
            result = root / f"result{ranks}-{trial.number}.json"
            pid = os.fork()
            if pid == 0:
                try:
                    _trial_in_child(trial, root, length, reference_file, result)
                finally:
                    os._exit(0)
            running[pid] = (trial, result)
        pid = _wait_any(list(running))  # only this harness's workers: the caller may have children of its own
        trial, result = running.pop(pid)
        try:
            done.append(Trial(**json.loads(result.read_text())))
        except (OSError, ValueError):
            trial.outcome = "harness error"
            trial.problems.append("the trial's worker wrote no result")
            done.append(trial)
    return sorted(done, key=lambda t: t.number)


def summary(trials: list[Trial]) -> str:
    outcomes = Counter(trial.outcome + ("" if trial.signalled else " (ended before the signal)") for trial in trials)
    statuses = Counter(trial.status for trial in trials)
    signals = Counter(signal.Signals(trial.signum).name for trial in trials)
    lost = sum(trial.outcome not in ("complete", "resumable") for trial in trials)
    ranks = trials[0].ranks if trials else 0
    return (f"{len(trials)} trials of {ranks} rank(s) ({dict(signals)}): outcomes {dict(outcomes)}, exit statuses "
            f"{dict(sorted(statuses.items(), key=str))}, lost runs {lost}, trials with a problem "
            f"{sum(bool(t.problems) for t in trials)}")


def trial_count(default: int) -> int:
    """``MTA_SIGNAL_TRIALS`` when set, else ``default``."""
    return int(os.environ.get("MTA_SIGNAL_TRIALS", default))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--ranks", type=int, choices=(1, 2), default=1)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    begun = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        trials = run_trials(draw_trials(args.trials, args.ranks, args.seed), Path(scratch), args.parallel)
    for trial in trials:
        print(f"trial {trial.number:2d}: {signal.Signals(trial.signum).name} to rank {trial.target} after "
              f"{trial.delay:.3f} s (checkpoint every {trial.checkpoint_every}): exit {trial.status}, {trial.outcome}"
              + (f"  PROBLEMS: {trial.problems} {trial.stderr!r}" if trial.problems else ""))
    print(summary(trials) + f"; {time.monotonic() - begun:.0f} s")
    return 0 if all(not trial.problems for trial in trials) else 1


if __name__ == "__main__":
    sys.exit(main())

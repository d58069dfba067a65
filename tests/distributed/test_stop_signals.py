"""SIGTERM or SIGINT sent to one rank (not to mpiexec) stops every rank at the same window end, with
one checkpoint and one exit status (143, 130), in every trial: never a hang. One that comes after the
last step lets rank 0 write the final parameters and stops every rank alike, the run complete; at a
random instant of a whole run it loses no run (``tests/train/signal_trials.py``).

Each trial launches ``maccum train`` on 2 ranks (the padded sentences: no scikit-learn to import,
4 windows of 2 micro-batches of 8 per epoch, a validation after each, a checkpoint every 3 steps,
epochs enough never to finish), waits for the first optimizer step, sleeps a trial's own random delay
(so the signal lands anywhere: in a micro-batch, a reduction, a periodic checkpoint, a validation) and
signals rank 0 or rank 1. Before the fix, 3 of 23 such trials hung,
one rank inside the checkpoint's all-gather, the other in the next window's all-reduce: the rank that
was signalled acted on its own signal, the other did not know of it yet.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from minitorch_accum.train.checkpoint import FileCheckpointer
from minitorch_accum.train.resume import read_final_record
from tests.distributed.launcher import REPOSITORY, mpiexec, run_ranks
from tests.distributed.rank_processes import wait_for_ranks
from tests.train import signal_trials

pytestmark = pytest.mark.mpi

TRIALS = 20
HANG_SECONDS = 30  # a trial still running this long after its signal is a hang
TRAIN = ["minitorch_accum.cli", "train", "--dataset", "sequences", "--accum", "1", "--micro-batch", "8",
         "--epochs", "1000", "--checkpoint-every", "3", "--progress", "none"]
STOPPED = re.compile(r"^\[(\d)\] maccum train: interrupted by signal (\d+) after optimizer step (\d+);")


def _steps_logged(out: Path) -> int:
    path = out / "metrics.jsonl"
    return path.read_text().count('"kind": "train"') if path.exists() else 0


def _trial(out: Path, signum: int, target: int, delay: float) -> dict:
    """One launch, one signal; what the job did."""
    command = [mpiexec(), "-n", "2", "-prepend-rank", sys.executable, "-m", "mpi4py", "-m", *TRAIN, "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    job = subprocess.Popen(command, cwd=REPOSITORY, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        ranks = wait_for_ranks(job.pid, 2)
        deadline = time.monotonic() + 60
        while _steps_logged(out) < 1 and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)  # both ranks are in the loop once a step is logged
        time.sleep(delay)
        os.kill(ranks[target], signum)
        sent = time.monotonic()
        try:
            _, stderr = job.communicate(timeout=HANG_SECONDS)
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            job.kill()
            _, stderr = job.communicate()
        return {"hung": hung, "status": job.returncode, "seconds": time.monotonic() - sent,
                "stops": [m.groups() for m in map(STOPPED.match, stderr.splitlines()) if m], "stderr": stderr}
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()


def _checkpoint_steps(out: Path) -> list[int]:
    checkpointer = FileCheckpointer(out / "checkpoints")
    return sorted(json.loads((path / "state.json").read_text())["state"]["step"] for path in checkpointer.checkpoints())


def test_a_signal_to_one_rank_stops_every_rank_at_one_window_end(tmp_path: Path, report: list[str]) -> None:
    problems, statuses, hangs = [], Counter(), 0
    for trial in range(TRIALS):
        signum = (signal.SIGTERM, signal.SIGINT)[trial % 2]
        target = trial // 2 % 2
        delay = random.Random(trial).uniform(0.0, 0.25)
        out = tmp_path / f"trial{trial}"
        seen = _trial(out, signum, target, delay)
        where = f"trial {trial} ({signal.Signals(signum).name} to rank {target} after {delay:.2f} s)"
        hangs += seen["hung"]
        statuses[seen["status"]] += 1
        stops = seen["stops"]
        steps = {int(step) for _, _, step in stops}
        if seen["hung"] or seen["status"] != 128 + signum:
            problems.append(f"{where}: {'hung' if seen['hung'] else 'exit status'} {seen['status']}")
        elif sorted(rank for rank, _, _ in stops) != ["0", "1"] or {int(s) for _, s, _ in stops} != {signum} \
                or len(steps) != 1:
            problems.append(f"{where}: the ranks did not stop together: {stops}")
        else:
            (step,) = steps
            latest = FileCheckpointer(out / "checkpoints").load_checkpoint()  # verified
            checkpoint_steps = _checkpoint_steps(out)
            if latest.state["step"] != step or checkpoint_steps.count(step) != 1:
                problems.append(f"{where}: stopped after step {step}, checkpoints at steps {checkpoint_steps}")
        if problems and problems[-1].startswith(where):
            problems[-1] += "\n" + seen["stderr"][-1500:]
    report.append(f"signal to one rank: {TRIALS} trials, hangs {hangs}, exit statuses "
                  f"{dict(sorted(statuses.items()))}, {TRIALS - len(problems)} stopped every rank at one window end "
                  "with one checkpoint")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("target", [0, 1])
def test_a_signal_to_one_rank_after_the_last_step_stops_every_rank_with_the_run_complete(
        target: int, tmp_path: Path) -> None:
    run_ranks(2, ["tests.distributed.rank_programs", "stop_after_training", str(tmp_path),
                  f"signal={int(signal.SIGTERM)}", f"target={target}"])
    stops = [json.loads((tmp_path / f"stop-rank{rank}.json").read_text()) for rank in (0, 1)]
    assert all(stop is not None and stop["signum"] == signal.SIGTERM and stop["complete"] for stop in stops), stops
    assert stops[0]["checkpoint"] == str(tmp_path / "final.safetensors") and stops[1]["checkpoint"] is None
    record = read_final_record(tmp_path / "final.safetensors")
    assert record is not None and record["steps"] == stops[0]["step"] == stops[1]["step"]
    assert "the run is complete, nothing to resume" in stops[1]["message"]


def test_random_instant_signals_to_one_rank_lose_no_run(tmp_path: Path, report: list[str]) -> None:
    mpiexec()  # skips without the dist extra
    # MTA_SIGNAL_TRIALS=50 for the full loop (python -m tests.train.signal_trials --ranks 2 --trials 50)
    trials = signal_trials.run_trials(signal_trials.draw_trials(signal_trials.trial_count(10), 2, seed=0), tmp_path)
    report.append("random-instant signal to one rank: " + signal_trials.summary(trials))
    problems = [f"trial {t.number} ({signal.Signals(t.signum).name} to rank {t.target} after {t.delay:.3f} s): "
                f"{t.outcome}, exit {t.status}: {t.problems} {t.stderr!r}" for t in trials if t.problems]
    assert not problems, "\n".join(problems)

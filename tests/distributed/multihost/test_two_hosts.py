"""The README's multi-host line on two hosts (network namespaces on this machine, TCP between them).

Each test gets fresh hosts h1 and h2 (the ``cluster`` fixture), launches through MPICH's Hydra with
its ssh launcher (``netns-ssh`` in place of ssh) and checks ``final.safetensors`` against one process
with the same global batch, bit for bit: float64 with ``--compensated``, where the window's sums do
not depend on how it is split over ranks. Rank 0 runs on h1; the hosts share no directory, so every
file a run writes is on h1 and a resume reaches h2's ranks over MPI. What the tests saw (host names,
the transport, bytes on h2's link, the abort time, what was bit-identical) is printed at the end of
the pytest run under "multi-host report".
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from benchmarks.harness.netns_cluster import NetnsCluster, missing_requirement
from minitorch_accum.train.checkpoint import FileCheckpointer
from tests.distributed.multihost.jobs import (
    TRAIN,
    Job,
    bit_identical,
    inter_node_transports,
    readme_line,
    train_one_process,
)

pytestmark = pytest.mark.mpi

EPOCHS = 2
ABORT_LIMIT_SECONDS = 30  # the bound for the surviving host's ranks to be gone


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One process, windows of 8 micro-batches (4 ranks x k=2, 2 ranks x k=4), 2 epochs."""
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(f"multi-host tests skipped: {reason}")
    out = tmp_path_factory.mktemp("one-process") / "run"
    train_one_process(out, [*TRAIN, "--accum", "8", "--epochs", str(EPOCHS), "--checkpoint-every", "0"])
    return out / "final.safetensors"


def _train(*extra: str) -> list[str]:
    return [*TRAIN, "--accum", "2", "--out", "run", *extra]


def _hosts_seen(stderr: str) -> list[str]:
    """The host names in the ranks' UCX log lines (``[h2:12345:0] ...``; UCX pads the pid to 5 places)."""
    return sorted(set(re.findall(r"\] \[(h\d+):\d+ *:\d+\]", stderr)))


def _train_lines(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return [line for line in lines if line.get("kind") == "train"]


def test_two_hosts_give_the_parameters_of_one_process_bit_for_bit(cluster: NetnsCluster, reference: Path,
                                                                   report: list[str], tmp_path: Path) -> None:
    before = cluster.link_bytes("h2")
    line = readme_line("h1,h2", 4, 2, _train("--epochs", str(EPOCHS), "--checkpoint-every", "0"))
    job = Job(cluster, line, tmp_path / "logs").check()
    crossed = sum(cluster.link_bytes("h2")) - sum(before)
    transports = inter_node_transports(job.stderr)
    assert transports == {"tcp/eth0"}, job.output()  # MPICH's UCX netmod over TCP, not shared memory
    assert _hosts_seen(job.stderr) == ["h1", "h2"]
    assert crossed > 1_000_000, f"only {crossed} bytes crossed h2's link"  # 12 windows of ~160 KB of pairs
    assert job.stdout.count(f"trained {6 * EPOCHS} optimizer steps") == 1
    tensors = bit_identical(cluster.home("h1") / "run" / "final.safetensors", reference)
    assert list(cluster.home("h2").iterdir()) == []  # rank 0 alone writes, on h1
    report.append(f"hosts {', '.join(_hosts_seen(job.stderr))}; MPICH netmod ucx, inter-node transport "
                  f"{', '.join(sorted(transports))}; {crossed / 1e6:.1f} MB over h2's eth0 (veth, not a NIC)")
    report.append(f"  {line}")
    report.append(f"  2 hosts x 2 ranks, --accum 2: final.safetensors bit-identical to one process with --accum 8 "
                  f"({tensors} tensors, {time.monotonic() - job.started:.1f} s)")


def test_a_checkpoint_on_host_1_alone_resumes_on_two_hosts_over_mpi(cluster: NetnsCluster, reference: Path,
                                                                    report: list[str], tmp_path: Path) -> None:
    Job(cluster, readme_line("h1,h2", 4, 2, _train("--epochs", "1", "--checkpoint-every", "3")),
        tmp_path / "first").check()
    checkpoints = FileCheckpointer(cluster.home("h1") / "run" / "checkpoints").checkpoints()
    assert [p.name for p in checkpoints] == ["step0000006-epoch0000-batch000045", "step0000003-epoch0000-batch000024"]
    assert list(cluster.home("h2").iterdir()) == []  # h2 has no file to resume from
    resumed = Job(cluster, readme_line("h1,h2", 4, 2, _train("--epochs", str(EPOCHS), "--resume")),
                  tmp_path / "second").check()
    assert "resumed from step 6 (epoch 1, micro-batch 0)" in resumed.stdout
    tensors = bit_identical(cluster.home("h1") / "run" / "final.safetensors", reference)
    assert list(cluster.home("h2").iterdir()) == []
    report.append(f"checkpoints written on h1 only ({len(checkpoints)}; h2's directory empty), resumed on h1,h2 "
                  f"(h2's ranks got it over MPI): bit-identical ({tensors} tensors)")


def _wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.005)


def test_a_dead_host_ends_the_job_and_the_run_resumes_on_the_other(cluster: NetnsCluster, reference: Path,
                                                                    report: list[str], tmp_path: Path) -> None:
    run = cluster.home("h1") / "run"
    job = Job(cluster, readme_line("h1,h2", 4, 2, _train("--epochs", str(EPOCHS), "--checkpoint-every", "2")),
              tmp_path / "killed")
    # after a checkpoint, the moment a step's line is written: the next window's micro-batches are running
    _wait_for(lambda: len(_train_lines(run)) >= 3 or job.process.poll() is not None, 90, "step 3")
    assert job.process.poll() is None, job.output()
    steps = len(_train_lines(run))
    _wait_for(lambda: len(_train_lines(run)) > steps or job.process.poll() is not None, 30, "the next step")
    killed = cluster.kill("h2")
    step_at_kill = len(_train_lines(run))
    killed_at = time.monotonic()
    code = job.wait(timeout=ABORT_LIMIT_SECONDS + 30)
    _wait_for(lambda: not cluster.pids("h1"), ABORT_LIMIT_SECONDS, "the end of h1's processes")
    abort_seconds = time.monotonic() - killed_at
    assert code != 0 and step_at_kill < 6 * EPOCHS, job.output()  # killed, not finished
    assert abort_seconds < ABORT_LIMIT_SECONDS, f"h1's ranks took {abort_seconds:.1f} s to end"
    # no torn checkpoint: each one verifies (sizes and SHA-256 of every file), latest names an intact one
    checkpointer = FileCheckpointer(run / "checkpoints")
    for path in checkpointer.checkpoints():
        checkpointer.load_checkpoint(path)
    latest = checkpointer.load_checkpoint()
    assert latest.skipped == (), latest.message
    resumed = Job(cluster, readme_line("h1", 2, 2, _train("--epochs", str(EPOCHS), "--resume")),
                  tmp_path / "resumed").check()
    assert "resuming a run of 4 rank(s) on 2: k per rank 2 -> 4" in resumed.stdout, resumed.output()
    tensors = bit_identical(run / "final.safetensors", reference)
    report.append(f"kill -9 of h2's {len(killed)} processes in window {step_at_kill + 1}: h1's ranks gone in "
                  f"{abort_seconds:.2f} s (mpiexec exit {code}); latest checkpoint (step {latest.state['step']}) "
                  f"intact; resumed with -hosts h1 (k 2 -> 4): bit-identical ({tensors} tensors)")


def test_a_host_without_link_fails_fast_naming_it(cluster: NetnsCluster, report: list[str], tmp_path: Path) -> None:
    cluster.set_link("h2", up=False)
    job = Job(cluster, readme_line("h1,h2", 4, 2, _train("--epochs", "1")), tmp_path / "logs")
    code = job.wait(timeout=ABORT_LIMIT_SECONDS + 30)
    seconds = time.monotonic() - job.started
    _wait_for(lambda: not cluster.pids("h1"), ABORT_LIMIT_SECONDS, "the end of h1's processes")
    assert code != 0 and seconds < ABORT_LIMIT_SECONDS, job.output()
    named = [line for line in job.stderr.splitlines() if '"h2"' in line and "unable to connect" in line]
    assert named, job.output()
    report.append(f"h2's link down at start: mpiexec exit {code} after {seconds:.1f} s: {named[0].strip()}")

"""Running the README's multi-host line on a NetnsCluster, and reading what it did.

The line is the README's (``mpiexec -n R -ppn P -hosts h1,h2 python -m mpi4py -m
minitorch_accum.cli train ...``), typed on host h1 in its home directory through ``netns-ssh``
as a user types it after ``ssh h1``, with only the environment a user sets around it
(``NetnsCluster.mpi_environment``: the venv on PATH, the checkout on PYTHONPATH, Hydra's ssh
launcher with netns-ssh as its ssh, UCX on TCP over eth0).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.harness.netns_cluster import NetnsCluster
from tests.distributed.launcher import REPOSITORY, mpiexec

__all__ = ["TRAIN", "Job", "bit_identical", "inter_node_transports", "readme_line", "train_one_process"]

#: the training every multi-host test runs: digits, float64 with compensation (the window's sums do
#: not depend on how the ranks split it), windows of 8 micro-batches of 32 in all
TRAIN = ["--dataset", "digits", "--micro-batch", "32", "--dtype", "float64", "--compensated", "--progress", "plain"]
WINDOW = 8


def readme_line(hosts: str, ranks: int, per_host: int, arguments: list[str]) -> str:
    """The README's multi-host line for ``hosts`` (``h1,h2``), ``ranks`` ranks, ``per_host`` per host."""
    words = ["mpiexec", "-n", str(ranks), "-ppn", str(per_host), "-hosts", hosts, "python", "-m", "mpi4py", "-m",
             "minitorch_accum.cli", "train", *arguments]
    return shlex.join(words)


class Job:
    """One launch of a line on a host of the cluster; stdout and stderr go to files in ``logs``."""

    def __init__(self, cluster: NetnsCluster, line: str, logs: Path, on: str = "h1") -> None:
        self.line = line
        logs.mkdir(parents=True, exist_ok=True)
        self.stdout_path, self.stderr_path = logs / "stdout.txt", logs / "stderr.txt"
        mpiexec()  # skips the test without the dist extra
        command = cluster.login_command(on, line, cluster.mpi_environment(Path(sys.executable), REPOSITORY))
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.process = subprocess.Popen(command, stdout=out, stderr=err)
        self.started = time.monotonic()

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.line} did not end within {timeout} s (a hang)\n{self.output()}") from None

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text()

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def output(self) -> str:
        return f"--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}"

    def check(self, timeout: float = 120) -> Job:
        code = self.wait(timeout)
        assert code == 0, f"{self.line} exited {code}\n{self.output()}"
        return self


def inter_node_transports(stderr: str) -> set[str]:
    """The transports UCX reports for inter-node connections (``tcp/eth0``), from UCX_LOG_LEVEL=info."""
    return {match for group in re.findall(r"inter-node cfg#\d+ tag\(([^)]*)\)", stderr) for match in group.split()}


def train_one_process(out: Path, arguments: list[str]) -> None:
    """``python -m minitorch_accum.cli train`` in this machine's own namespace, one process."""
    subprocess.run([sys.executable, "-m", "minitorch_accum.cli", "train", *arguments, "--out", str(out)],
                   cwd=REPOSITORY, check=True, capture_output=True, timeout=180)


def bit_identical(got: Path, expected: Path) -> int:
    """Assert two safetensors files hold the same tensors bit for bit; return how many."""
    from safetensors.numpy import load_file

    a, b = load_file(str(got)), load_file(str(expected))
    assert sorted(a) == sorted(b)
    for name in b:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        np.testing.assert_array_equal(a[name].view(np.uint8), b[name].view(np.uint8), err_msg=name)
    return len(b)

"""Measuring: launch the rank program with 1 and with R ranks, alternately (so the machine's
state is shared by both), every rank on the same number of threads: the step-time ratio is
then data parallelism's scaling over R cores (R at best). With ``hosts`` > 1 the ranks run on
namespace hosts (``hosts.py``), one process of 1 rank on h1, R ranks spread over the hosts."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.all_reduce.hosts import LINK, launch_on_hosts, namespace_hosts
from benchmarks.all_reduce.settings import Settings, settings_record
from benchmarks.harness import Log, machine_info, median

__all__ = ["BENCHMARK", "measure"]

BENCHMARK = "all_reduce"
REPOSITORY = Path(__file__).resolve().parents[2]


def _mpiexec() -> str:
    beside = Path(sys.executable).with_name("mpiexec")
    if beside.exists():
        return str(beside)
    raise RuntimeError('the all-reduce benchmark needs mpiexec: pip install -e ".[dist]" (mpi4py and mpich)')


def _launch(ranks: int, threads: int, settings_file: Path, log: Log, cluster: Any = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        threading = {"MTA_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
                     "OMP_NUM_THREADS": str(threads)}
        program = ["benchmarks.all_reduce.rank_program", str(settings_file), str(out)]
        if cluster is not None:
            log(f"{ranks} rank(s) x {threads} thread(s) on namespace hosts")
            network = launch_on_hosts(cluster, ranks, threading, program)
            return {**json.loads(out.read_text()), "network": network}
        env = {**os.environ, **threading, "PYTHONPATH": str(REPOSITORY)}
        command = [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", *program]
        log(f"{ranks} rank(s) x {threads} thread(s)")
        subprocess.run(command, cwd=REPOSITORY, env=env, check=True, timeout=600)
        return json.loads(out.read_text())


def _network(settings: Settings, many: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the ranks ran and what carried their bytes (recorded beside the figures)."""
    if settings.hosts == 1:
        return {"hosts": 1, "link": "one machine: MPICH's shared memory between the ranks"}
    seen = many[-1]["network"]
    return {"hosts": settings.hosts, "host_names": seen["hosts"], "ranks_per_host": seen["ranks_per_host"],
            "link": LINK, "real_nic": False, "netmod": "ucx", "transports": seen["transports"],
            "command": seen["command"], "link_bytes_last_run": seen["link_bytes"]}


def measure(settings: Settings, log: Log) -> dict[str, Any]:
    if settings.device != "cpu":
        raise ValueError("the all-reduce benchmark runs MPI on the CPU; NCCL runs are not recorded yet")
    hosts = namespace_hosts(settings.hosts) if settings.hosts > 1 else contextlib.nullcontext()
    with tempfile.TemporaryDirectory() as tmp, hosts as cluster:
        settings_file = Path(tmp) / "settings.json"
        settings_file.write_text(json.dumps(settings_record(settings)))
        single, many = [], []
        for _ in range(settings.rounds):
            single.append(_launch(1, settings.threads_per_rank, settings_file, log, cluster))
            many.append(_launch(settings.ranks, settings.threads_per_rank, settings_file, log, cluster))
    arenas = []
    for i, n in enumerate(settings.arena_elements):
        copy = [s for run in many for s in run["arenas"][i]["copy_seconds"]]
        reduce = [s for run in many for s in run["arenas"][i]["allreduce_seconds"]]
        nbytes = many[0]["arenas"][i]["bytes"]
        arenas.append({"elements": n, "bytes": nbytes, "copy_seconds": median(copy),
                       "allreduce_seconds": median(reduce), "copy_gbps": nbytes / median(copy) / 1e9,
                       "allreduce_gbps": nbytes / median(reduce) / 1e9,
                       "allreduce_over_copy_time": median(reduce) / median(copy)})
    one = [s for run in single for s in run["step_seconds"]]
    r = [s for run in many for s in run["step_seconds"]]
    overlapped = [s for run in many for s in run["overlap_step_seconds"]]
    return {"benchmark": BENCHMARK, "machine": machine_info(), "settings": settings_record(settings),
            "network": _network(settings, many), "arenas": arenas,
            "step": {"k_single": single[0]["k"], "k_per_rank": many[0]["k"],
                     "items_per_step": settings.ranks * settings.k * settings.micro_batch,
                     "single_seconds": median(one), "ranks_seconds": median(r),
                     "speedup": median(one) / median(r), "single_samples": one, "ranks_samples": r,
                     "overlap_seconds": median(overlapped), "overlap_samples": overlapped,
                     "overlap_over_plain": median(overlapped) / median(r),
                     # rank 0's record of the last timed window of the last R-rank run, bucket by bucket
                     "window_reduction": many[-1]["window_reduction"],
                     "overlap_window_reduction": many[-1]["overlap_window_reduction"]}}

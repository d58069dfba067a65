"""``--hosts N``: the all-reduce benchmark over N hosts made as network namespaces on this machine.

The hosts are those the multi-host tests use too (``benchmarks/harness/netns_cluster.py``): each a
network namespace with its own host name and directory, its ``eth0`` a veth pair into a bridge;
the ranks are launched by MPICH's Hydra with its ssh launcher (``netns-ssh`` in place of ssh) and
MPICH's UCX netmod talks TCP over eth0. That is the software path of a multi-host job (TCP stack,
UCX, Hydra), not its hardware: a veth link is not a NIC. The kernel copies each packet from one
namespace to the other (no wire, no NIC offload, no switch), both ends share this machine's
cores, so the figures say what TCP between processes costs here, not what a network gives; the
result file and the table say so.
"""

from __future__ import annotations

import contextlib
import math
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["LINK", "check_hosts_possible", "launch_on_hosts", "namespace_hosts"]

LINK = ("veth pairs into a Linux bridge between network namespaces on one machine: not a real NIC (the kernel "
        "copies each packet; no wire, no NIC offload, both ends share this machine's cores)")
REPOSITORY = Path(__file__).resolve().parents[2]


def check_hosts_possible() -> None:
    """ValueError (one line) when namespaces cannot be made here."""
    from benchmarks.harness.netns_cluster import missing_requirement

    reason = missing_requirement()
    if reason is not None:
        raise ValueError(f"--hosts: {reason}")


@contextlib.contextmanager
def namespace_hosts(count: int) -> Iterator[Any]:
    """A NetnsCluster of ``count`` hosts for the duration of a measurement (removed after it)."""
    from benchmarks.harness.netns_cluster import NetnsCluster, remove_stale

    check_hosts_possible()
    remove_stale()
    with tempfile.TemporaryDirectory(prefix="all-reduce-hosts-") as tmp, NetnsCluster(Path(tmp), count) as cluster:
        yield cluster


def launch_on_hosts(cluster: Any, ranks: int, environment: dict[str, str], program: list[str]) -> dict[str, Any]:
    """``mpiexec -n ranks -ppn P -hosts h1,...`` of ``python -m mpi4py -m <program>``, typed on h1;
    returns what the network did: the hosts used, UCX's inter-node transports, bytes on the links."""
    hosts = cluster.hosts[:min(ranks, len(cluster.hosts))]
    per_host = math.ceil(ranks / len(hosts))
    line = shlex.join(["mpiexec", "-n", str(ranks), "-ppn", str(per_host), "-hosts", ",".join(hosts),
                       "python", "-m", "mpi4py", "-m", *program])
    env = {**cluster.mpi_environment(Path(sys.executable), REPOSITORY), **environment}
    before = {host: sum(cluster.link_bytes(host)) for host in hosts}
    done = subprocess.run(cluster.login_command(hosts[0], line, env), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{line} on the namespace hosts exited {done.returncode}:\n{done.stderr[-3000:]}")
    transports = sorted({t for group in re.findall(r"inter-node cfg#\d+ tag\(([^)]*)\)", done.stderr)
                         for t in group.split()})
    return {"hosts": hosts, "ranks_per_host": per_host, "command": line, "transports": transports,
            "link_bytes": {host: sum(cluster.link_bytes(host)) - before[host] for host in hosts}}

"""Hosts on one machine: Linux network namespaces joined by veth pairs to a bridge.

``NetnsCluster(root, hosts=2).create()`` makes hosts ``h1``, ``h2`` (...): each a network namespace
``<name>-hN`` with one interface ``eth0`` at ``198.18.0.N/24`` (RFC 2544's benchmarking range,
198.18.0.0/15, which no real network routes), its peer a port of the bridge ``br0`` in a switch
namespace ``<name>-sw``. Nothing is added to the machine's own network namespace, so nothing here
can touch its interfaces or routes. The host names resolve in every host through the namespaces'
own ``/etc/netns/<namespace>/hosts``. ``<root>/netns-ssh`` (a copy of ``netns_ssh.sh``) is the
``ssh`` MPICH's Hydra calls; each host has its own directory ``<root>/hosts/hN``, which it sees at
``<root>/home`` (``workdir``), the same path on every host.

``close()`` ends every process in the cluster's namespaces (by pid), deletes the namespaces (their
links and the bridge go with them) and the ``/etc/netns`` entries; ``remove_stale()`` does the same
for clusters of processes that are gone (a run killed before its teardown). Names carry the creating
process's pid and a random token, so concurrent runs never collide.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["CARRIED_PREFIXES", "PREFIX", "SUBNET", "NetnsCluster", "missing_requirement", "remove_stale"]

PREFIX = "mta-mh"
SUBNET = "198.18.0"  # hosts at .1, .2, ...; /24 inside 198.18.0.0/15 (RFC 2544)
SCRIPT = Path(__file__).with_name("netns_ssh.sh")
NETNS_ETC = Path("/etc/netns")
#: the launching environment's variables that choose how ranks compute (see ``mpi_environment``)
CARRIED_PREFIXES = ("OPENBLAS_", "MTA_")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed: {result.stderr.strip() or result.returncode}")
    return result


def _namespace_pids(namespace: str) -> list[int]:
    result = _ip("netns", "pids", namespace, check=False)
    return [int(p) for p in result.stdout.split()] if result.returncode == 0 else []


def _kill_all(namespace: str, timeout: float = 5.0) -> None:
    """SIGKILL every process in ``namespace``, until none is left."""
    deadline = time.monotonic() + timeout
    while (pids := _namespace_pids(namespace)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it ended by itself meanwhile
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def _delete_namespace(namespace: str) -> None:
    _kill_all(namespace)
    _ip("netns", "delete", namespace, check=False)
    shutil.rmtree(NETNS_ETC / namespace, ignore_errors=True)


@functools.cache
def missing_requirement() -> str | None:
    """Why namespaces cannot be made here (one line), or None (found out once per process)."""
    if os.geteuid() != 0:
        return f"network namespaces need root (running as uid {os.geteuid()})"
    for tool in ("ip", "unshare", "mount", "hostname"):
        if shutil.which(tool) is None:
            return f"network namespaces need {tool!r} (iproute2, util-linux) on PATH"
    probe = f"{PREFIX}-{os.getpid()}-probe{secrets.token_hex(2)}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace here: ip netns add: {made.stderr.strip()}"
    _ip("netns", "delete", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the namespaces of clusters whose creating process is gone; return their names."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    removed = []
    for line in listed:
        name = line.split(" ", 1)[0]
        parts = name.split("-")
        if not name.startswith(f"{PREFIX}-") or len(parts) < 4 or not parts[2].isdigit():
            continue
        if not _alive(int(parts[2])):
            _delete_namespace(name)
            removed.append(name)
    return removed


class NetnsCluster:
    """``hosts`` hosts ``h1..hN`` joined by a bridge; see the module's docstring."""

    def __init__(self, root: Path, hosts: int = 2) -> None:
        if not 1 <= hosts <= 250:
            raise ValueError(f"a cluster has 1 to 250 hosts, got {hosts}")
        self.root = Path(root)
        self.name = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(3)}"
        self.hosts = [f"h{i}" for i in range(1, hosts + 1)]
        self.switch = f"{self.name}-sw"
        self.ssh = self.root / "netns-ssh"
        self.workdir = self.root / "home"  # what every host sees as its home directory
        self._made: list[str] = []

    # ------------------------------------------------------------------ names
    def namespace(self, host: str) -> str:
        return f"{self.name}-{host}"

    def address(self, host: str) -> str:
        return f"{SUBNET}.{self.hosts.index(host) + 1}"

    def home(self, host: str) -> Path:
        """The directory ``host`` sees at ``workdir`` (read here, from outside every host)."""
        return self.root / "hosts" / host

    # ---------------------------------------------------------------- making
    def create(self) -> NetnsCluster:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def _create(self) -> None:
        for host in self.hosts:
            self.home(host).mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCRIPT, self.ssh)
        self.ssh.chmod(0o755)
        (self.root / "cluster.env").write_text(f"NETNS_PREFIX='{self.name}'\nHOSTS='{' '.join(self.hosts)}'\n")
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{self.address(h)} {h}\n" for h in self.hosts)
        self._add_namespace(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for host in self.hosts:
            namespace = self.namespace(host)
            (NETNS_ETC / namespace).mkdir(parents=True, exist_ok=True)
            (NETNS_ETC / namespace / "hosts").write_text(hosts_file)
            self._add_namespace(namespace)
            port = self.port(host)
            _ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", namespace)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", namespace, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            _ip("-n", namespace, "link", "set", "eth0", "up")
            _ip("-n", namespace, "link", "set", "lo", "up")

    def _add_namespace(self, namespace: str) -> None:
        _ip("netns", "add", namespace)
        self._made.append(namespace)

    def port(self, host: str) -> str:
        """The bridge's port that ``host``'s cable plugs into (in the switch namespace)."""
        return f"port-{host}"

    # -------------------------------------------------------------- using it
    def command(self, host: str, line: str) -> list[str]:
        """``ssh host line``, as argv."""
        return [str(self.ssh), host, line]

    def mpi_environment(self, python: Path, pythonpath: Path) -> dict[str, str]:
        """What a user sets on the launching host before typing the multi-host line:
        ``PATH`` with the virtual environment's bin first (activated), ``PYTHONPATH`` (a checkout rather
        than an installed copy), Hydra's ssh launcher with ``netns-ssh`` as its ssh, and UCX (MPICH's
        default netmod) on TCP over eth0: it sees the namespaces as one machine (one kernel, one boot
        id) and would move the bytes through shared memory instead. ``UCX_LOG_LEVEL=info`` (to stderr)
        makes each rank say which transports it chose.

        The variables that choose how the numbers are computed (``OPENBLAS_*``, ``MTA_*``: the BLAS
        kernel, the threads) are carried over from this process's environment, as a user's exported
        variables reach mpiexec and Hydra passes them to every rank: without them the ranks would
        compute with other kernels than the one-process reference (on an AMD EPYC machine whose
        environment sets ``OPENBLAS_CORETYPE=Haswell``, OpenBLAS otherwise picks SkylakeX) and
        differ from it in the last bit."""
        carried = {name: value for name, value in os.environ.items() if name.startswith(CARRIED_PREFIXES)}
        return {**carried,
                "PATH": f"{python.parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONPATH": str(pythonpath), "HYDRA_LAUNCHER": "ssh", "HYDRA_LAUNCHER_EXEC": str(self.ssh),
                "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0", "UCX_LOG_LEVEL": "info", "UCX_LOG_FILE": "stderr"}

    def login_command(self, host: str, line: str, environment: dict[str, str]) -> list[str]:
        """``ssh host 'cd <home> && export ... && exec line'``: ``line`` run on ``host`` in its home
        directory with ``environment``, as argv (its process becomes the line's: ``exec`` all the way)."""
        exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in environment.items())
        return self.command(host, f"cd {shlex.quote(str(self.workdir))} && export {exports} && exec {line}")

    def pids(self, host: str) -> list[int]:
        """Every process running on ``host``."""
        return _namespace_pids(self.namespace(host))

    def kill(self, host: str) -> list[int]:
        """kill -9 every process of ``host`` (the host dies); returns the pids that were killed."""
        pids = self.pids(host)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it ended by itself meanwhile
                os.kill(pid, signal.SIGKILL)
        return pids

    def set_link(self, host: str, up: bool) -> None:
        """Plug ``host``'s cable in or pull it out (its bridge port up or down: no carrier on eth0)."""
        _ip("-n", self.switch, "link", "set", self.port(host), "up" if up else "down")

    def link_bytes(self, host: str) -> tuple[int, int]:
        """Bytes received and sent so far by ``host``'s eth0."""
        shown = json.loads(_ip("-n", self.namespace(host), "-j", "-s", "link", "show", "eth0").stdout)
        stats = shown[0]["stats64"]
        return int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])

    def close(self) -> None:
        """End every process in the cluster, delete its namespaces and their /etc/netns entries."""
        for namespace in reversed(self._made):
            _delete_namespace(namespace)
        self._made.clear()

    def __enter__(self) -> NetnsCluster:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()

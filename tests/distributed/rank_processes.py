"""Finding the rank processes of a job the test started, to signal or kill one of them by pid.

Hydra starts ``hydra_pmi_proxy`` under ``mpiexec`` and the ranks under the proxy, each with
``PMI_RANK`` in its environment; only descendants of the given pid are considered.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["descendants", "rank_pids", "wait_for_ranks"]


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every process (read from /proc/PID/stat: not every kernel has .../children)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # the command name (field 2) is in parentheses and may hold spaces: the parent pid follows the last ')'
        parents[int(stat.parent.name)] = int(text[text.rindex(")") + 2:].split()[1])
    return parents


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid``."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def rank_pids(root: int) -> dict[int, int]:
    """{rank: pid} of the MPI ranks below ``root`` (mpiexec's pid)."""
    ranks = {}
    for pid in descendants(root):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in environ:
            if entry.startswith(b"PMI_RANK="):
                ranks[int(entry.split(b"=", 1)[1])] = pid
    return ranks


def wait_for_ranks(root: int, count: int, timeout: float = 30.0) -> dict[int, int]:
    """``rank_pids`` once ``count`` ranks are running (AssertionError after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = rank_pids(root)
        if len(found) == count:
            return found
        if not os.path.exists(f"/proc/{root}"):
            break
        time.sleep(0.02)
    raise AssertionError(f"{count} ranks did not start under pid {root} within {timeout} s")

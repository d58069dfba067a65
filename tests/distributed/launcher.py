"""Starting R ranks from a test: the venv's mpiexec, ``python -m mpi4py`` (a failing rank aborts
the job), a timeout, and a clear skip when the ``dist`` extra is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 60


def mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), or skip the test with the reason."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip('the dist extra is not installed (pip install -e ".[dist]": mpi4py and mpich)')
    found = Path(sys.executable).with_name("mpiexec")
    if found.exists():
        return str(found)
    on_path = shutil.which("mpiexec")
    if on_path is None:
        pytest.skip("mpi4py is installed but no mpiexec was found (install the mpich wheel: the dist extra)")
    return on_path


def run_ranks(ranks: int, module_args: list[str], timeout: float = TIMEOUT_SECONDS,
              check: bool = True) -> subprocess.CompletedProcess:
    """``mpiexec -n ranks python -m mpi4py -m <module_args>`` from the repository root."""
    command = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi4py", "-m", *module_args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(command, cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
                             f"\n--- stderr\n{result.stderr[-4000:]}")
    return result


def run_programs(programs: list[list[str]], timeout: float = TIMEOUT_SECONDS,
                 environments: list[dict[str, str | None]] | None = None) -> subprocess.CompletedProcess:
    """An MPMD launch, one rank per program: ``mpiexec -prepend-rank -n 1 python -m mpi4py -m <program 0>
    : -n 1 ...``; each output line starts with ``[rank]``. ``environments``: per rank, variables to set
    (a value) or remove (None) in that rank alone, through ``env``, as a user's launch line does. Not
    checked: the caller reads the exit status."""
    command = [mpiexec(), "-prepend-rank"]
    for position, program in enumerate(programs):
        changes = environments[position] if environments else {}
        prefix = ["env", *(f"--unset={name}" if value is None else f"{name}={value}"
                           for name, value in changes.items())] if changes else []
        command += ([":"] if position else []) + ["-n", "1", *prefix, sys.executable, "-m", "mpi4py", "-m", *program]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(command, cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=timeout)

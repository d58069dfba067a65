"""The two-host bit-for-bit test under both environments these machines come with.

An AMD EPYC machine of this project sets ``OPENBLAS_CORETYPE=Haswell`` and ``OPENBLAS_L2_SIZE``; an
Intel Xeon sets neither, and OpenBLAS then picks its kernel by itself (SkylakeX on both). The
one-process reference of ``test_two_hosts.py`` runs in the test's environment and the ranks are
started through a login shell, so the ranks compute with the reference's kernel only if the
launching environment's variables reach them (``NetnsCluster.mpi_environment``). Running that test
in a child pytest with the variables set and with them unset proves it on either machine kind.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness.netns_cluster import CARRIED_PREFIXES, NetnsCluster, missing_requirement
from tests.distributed.launcher import REPOSITORY, mpiexec

pytestmark = pytest.mark.mpi

BIT_FOR_BIT = ("tests/distributed/multihost/test_two_hosts.py::"
               "test_two_hosts_give_the_parameters_of_one_process_bit_for_bit")
#: the AMD EPYC machine's variables (its L2 size: 1 MiB per core)
AMD_VARIABLES = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}


def test_the_launching_environment_s_blas_and_thread_variables_reach_the_ranks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("MTA_THREADS", "1")
    monkeypatch.setenv("OMP_PLACES", "cores")  # not one that chooses a kernel here: a login does not carry it
    environment = NetnsCluster(tmp_path).mpi_environment(Path(sys.executable), REPOSITORY)
    assert environment["OPENBLAS_CORETYPE"] == "Haswell" and environment["MTA_THREADS"] == "1"
    assert "OMP_PLACES" not in environment
    assert environment["PYTHONPATH"] == str(REPOSITORY)  # a user's value, not the carried one
    assert CARRIED_PREFIXES == ("OPENBLAS_", "MTA_")


@pytest.mark.parametrize("variables", [AMD_VARIABLES, {}], ids=["OPENBLAS_CORETYPE=Haswell", "BLAS-variables-unset"])
def test_two_hosts_equal_one_process_with_and_without_the_machine_s_blas_variables(
        variables: dict[str, str], tmp_path: Path) -> None:
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(f"multi-host tests skipped: {reason}")
    mpiexec()  # skips without the dist extra
    environment = {name: value for name, value in os.environ.items() if not name.startswith("OPENBLAS_")}
    environment.update(variables)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", BIT_FOR_BIT,
                             "--basetemp", str(tmp_path / "inner")],
                            cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-4000:] + result.stderr[-2000:]

"""The ``cluster`` fixture (two hosts as network namespaces, see netns_cluster.py) and the report
the multi-host tests print at the end of a pytest run (shown with ``-q`` too: a terminal summary
section), so a CI log says which hosts ran, which MPICH netmod carried the bytes, how long an abort
took and what was bit-identical."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.multihost.netns_cluster import NetnsCluster, missing_requirement, remove_stale

REPORT: list[str] = []
_REQUIREMENT: list[str | None] = []


def _requirement() -> str | None:
    if not _REQUIREMENT:
        _REQUIREMENT.append(missing_requirement())
    return _REQUIREMENT[0]


@pytest.fixture
def report() -> Iterator[list[str]]:
    """Lines a test adds to the multi-host report (printed in the terminal summary)."""
    yield REPORT


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    """Hosts h1 and h2 (namespaces, a bridge, own host names and directories), torn down after the test
    whatever its outcome."""
    reason = _requirement()
    if reason is not None:
        pytest.skip(f"multi-host tests {reason}")
    stale = remove_stale()
    if stale:
        REPORT.append(f"removed {len(stale)} stale namespace(s) of an earlier run: {', '.join(stale)}")
    with NetnsCluster(tmp_path / "cluster", hosts=2) as made:
        yield made


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORT:
        terminalreporter.section("multi-host report (network namespaces)")
        for line in REPORT:
            terminalreporter.write_line(line)

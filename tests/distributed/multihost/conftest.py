"""The ``cluster`` fixture: hosts h1 and h2 as network namespaces on this machine (netns_cluster.py).
What the tests saw goes into the data-parallel report (the ``report`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.harness.netns_cluster import NetnsCluster, missing_requirement, remove_stale
from tests.distributed.report import REPORT


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NetnsCluster]:
    """Hosts h1 and h2 (namespaces, a bridge, own host names and directories), torn down after the test
    whatever its outcome; namespaces that a killed earlier run left are removed first."""
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(f"multi-host tests skipped: {reason}")
    stale = remove_stale()
    if stale:
        REPORT.append(f"removed {len(stale)} stale namespace(s) of an earlier run: {', '.join(stale)}")
    with NetnsCluster(tmp_path / "cluster", hosts=2) as made:
        yield made

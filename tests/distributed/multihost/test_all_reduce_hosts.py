"""The all-reduce benchmark's ``--hosts`` mode on tiny settings: its ranks run on two namespace
hosts, UCX carries the bytes over TCP on eth0, the result says the link is not a real NIC, and the
last window's reduction is recorded bucket by bucket."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.all_reduce.main import ALL_REDUCE_HOSTS
from benchmarks.all_reduce.settings import hosts_quick_settings
from benchmarks.harness import run_benchmark
from benchmarks.harness.netns_cluster import missing_requirement
from tests.distributed.launcher import mpiexec

pytestmark = pytest.mark.mpi


def test_the_benchmark_over_two_namespace_hosts_records_the_link_and_each_bucket(tmp_path: Path,
                                                                                 report: list[str]) -> None:
    mpiexec()  # skips without the dist extra
    reason = missing_requirement()
    if reason is not None:
        pytest.skip(f"multi-host tests skipped: {reason}")
    settings = replace(hosts_quick_settings(), arena_elements=(1 << 12,), repeats=1, windows=1, rounds=1)
    payload, files = run_benchmark(ALL_REDUCE_HOSTS, settings, tmp_path, plot=False)
    assert files.json.name.startswith("all_reduce_hosts-")  # never replaces the one-machine figures
    network = payload["network"]
    assert (network["hosts"], network["host_names"], network["real_nic"]) == (2, ["h1", "h2"], False)
    assert network["transports"] == ["tcp/eth0"] and "not a real NIC" in network["link"]
    assert all(nbytes > 0 for nbytes in network["link_bytes_last_run"].values())
    (arena,) = payload["arenas"]
    assert math.isfinite(arena["allreduce_gbps"]) and arena["allreduce_gbps"] > 0
    record = payload["step"]["window_reduction"]
    assert record["buckets"] and record["bytes"] == sum(b["nbytes"] for b in record["buckets"])
    assert all(b["seconds"] > 0 and b["offset"] >= 0 and b["collective"] == "allreduce" for b in record["buckets"])
    table = ALL_REDUCE_HOSTS.format_table(payload)
    assert "not a real NIC" in table and "the last window's reduction on rank 0" in table
    report.append(f"all-reduce benchmark --hosts 2 (tiny): {arena['bytes']} B arena at {arena['allreduce_gbps']:.2f} "
                  f"GB/s over {', '.join(network['transports'])} (veth, not a NIC); last window: "
                  f"{len(record['buckets'])} bucket(s), {record['bytes']} B")

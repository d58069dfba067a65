"""Freed array memory kept in the heap: a micro-batch that allocates what the last one freed
takes no new pages (counted as the process's minor page faults)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minitorch_accum.backend import MALLOC_ENV, retain_freed_memory, retained_memory

_PROGRAM = """
import resource, sys
import numpy as np
if sys.argv[1] == "retain":
    from minitorch_accum.backend import retain_freed_memory
    retain_freed_memory()
def micro_batch():
    arrays = [np.ones(1 << 18, np.float32) for _ in range(24)]  # 24 MiB of 1 MiB arrays
    del arrays
for _ in range(3):
    micro_batch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    micro_batch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROGRAM, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_kept_memory_spares_the_page_faults_of_every_later_micro_batch() -> None:
    kept, default = _faults("retain"), _faults("default")
    # 10 micro-batches of 24 MiB are 61,440 pages: faulted in every time by default, once when kept
    assert kept < 500 < 20_000 < default


def test_it_reports_what_it_did_and_the_environment_can_refuse_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MALLOC_ENV, "default")
    assert retain_freed_memory().startswith("malloc as it is")
    monkeypatch.delenv(MALLOC_ENV)
    done = retain_freed_memory()
    assert done == retained_memory() and (done.startswith("freed memory kept") or "not glibc" in done)

"""Lines the data-parallel tests report: what the multi-host and signal tests saw (host names, the
MPICH netmod, abort times, what was bit-identical, hangs), printed by tests/distributed/conftest.py in
the terminal summary, so a CI log shows them with ``-q`` and without ``-s``."""

from __future__ import annotations

__all__ = ["REPORT"]

REPORT: list[str] = []

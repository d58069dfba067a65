"""The ``report`` fixture and the terminal-summary section that prints its lines at the end of a
pytest run (shown with ``-q`` too; see report.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.distributed.report import REPORT


@pytest.fixture
def report() -> Iterator[list[str]]:
    """Lines a test adds to the report (printed in the terminal summary)."""
    yield REPORT


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if REPORT:
        terminalreporter.section("data-parallel report (multi-host over network namespaces, signals)")
        for line in REPORT:
            terminalreporter.write_line(line)

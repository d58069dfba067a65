"""A user's site directory in which the pytest plugin is installed: found by its entry point,
as pip would leave it, not by a conftest or ``-p``."""

from __future__ import annotations

import pytest


def install_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, distribution: str) -> None:
    """A dist-info named ``distribution`` that declares the plugin's pytest11 entry point, on sys.path."""
    site = pytester.mkdir("site")
    info = site / f"{distribution}-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nminitorch_accum = minitorch_accum.testing.pytest_plugin\n")
    monkeypatch.syspath_prepend(str(site))

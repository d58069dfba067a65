"""Shared test configuration: hypothesis profiles, the package's pytest plugin, hardware markers.

Profiles (registered by ``minitorch_accum.testing.profiles``): ``minitorch_accum-ci`` (default;
bounded examples, no deadline) and ``minitorch_accum-dev`` (many more examples). Choose with
``MTA_HYPOTHESIS_PROFILE=minitorch_accum-dev`` (``ci``, ``dev`` and ``thorough`` name them too).

The package's pytest plugin (the ``accumulation_equivalence`` fixture, the ``accumulation``
marker) is loaded by its ``pytest11`` entry point once the package is installed; a checkout run
without that entry point (or with ``-p no:minitorch_accum``) registers it here, so the suite's own
tests of the plugin always find it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from minitorch_accum.testing import pytest_plugin
from minitorch_accum.testing.profiles import CI_PROFILE, DEV_PROFILE
from tests.read_only_mount import read_only_directory

pytest_plugins = ("pytester",)  # tests/testing/test_pytest_plugin.py runs pytest on files it writes

_ALIASES = {"ci": CI_PROFILE, "dev": DEV_PROFILE, "thorough": DEV_PROFILE}
_chosen = os.environ.get("MTA_HYPOTHESIS_PROFILE", CI_PROFILE)
settings.load_profile(_ALIASES.get(_chosen, _chosen))


def pytest_configure(config: pytest.Config) -> None:
    manager = config.pluginmanager
    if not manager.is_registered(pytest_plugin):
        manager.register(pytest_plugin, "minitorch_accum.testing.pytest_plugin")


def _cuda_usable() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


CUDA = _cuda_usable()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device and CuPy")
    for item in items:
        if "gpu" in item.keywords and not CUDA:
            item.add_marker(skip_gpu)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """An empty directory on a read-only mount (``tests/read_only_mount.py``; skipped without root)."""
    with read_only_directory(tmp_path / "read-only") as directory:
        yield directory

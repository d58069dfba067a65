"""A directory on a read-only file system, for the tests of outputs that cannot be written.

The tests run as root here, and root ignores permission bits: only a read-only mount makes a
directory unwritable for it. ``read_only_directory`` mounts an empty read-only tmpfs (root and
``mount`` needed; the test is skipped, saying why, where they are not) and unmounts it afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["read_only_directory"]


@contextlib.contextmanager
def read_only_directory(directory: Path) -> Iterator[Path]:
    """``directory`` (created) as the mount point of an empty read-only tmpfs while the block runs."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only directory needs a read-only mount: root and mount")
    directory.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(directory)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield directory
    finally:
        # lazily if busy, so that pytest's clean-up of tmp_path never meets a read-only mount
        if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], check=True)

"""The benchmarks are programs of the repository, not of the package: put the repository
root first on the path so ``import benchmarks`` finds this checkout's, wherever pytest runs from."""

from __future__ import annotations

import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]

if str(REPOSITORY) not in sys.path:
    sys.path.insert(0, str(REPOSITORY))

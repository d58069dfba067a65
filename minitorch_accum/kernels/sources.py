"""The CUDA sources shipped with the package, as text ready for NVRTC.

The .cu and .cuh files live in csrc/ at the repository root and ship as
package data through the symlink minitorch_accum/kernels/csrc. NVRTC from the
pip wheel has no include path to them, so local ``#include "x.cuh"`` lines are
inlined here, each piece preceded by a ``#line`` directive: compiler messages
name the real file and line, and CuPy's on-disk cache key (the source text)
changes whenever a header does.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

__all__ = ["csrc_dir", "cuda_sources", "source_text"]

_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"\s*$')
_PRAGMA_ONCE = re.compile(r"^\s*#\s*pragma\s+once\s*$")


def csrc_dir() -> Path:
    """The directory holding the .cu/.cuh files (the package's csrc, symlink resolved)."""
    return (Path(__file__).parent / "csrc").resolve()


def cuda_sources() -> list[Path]:
    """Every CUDA source file (*.cu), sorted by name."""
    return sorted(csrc_dir().glob("*.cu"))


def _expand(path: Path, seen: set[Path], out: list[str]) -> None:
    out.append(f'#line 1 "{path}"')
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = _INCLUDE.match(line)
        header = path.parent / match.group(1) if match else None
        if header is not None and header.is_file():
            header = header.resolve()
            if header not in seen:  # every header here is #pragma once
                seen.add(header)
                _expand(header, seen, out)
            out.append(f'#line {number + 1} "{path}"')
        elif _PRAGMA_ONCE.match(line):
            out.append("")  # meaningless once inlined; keeps line numbers
        else:
            out.append(line)


@functools.cache
def source_text(path: Path) -> str:
    """The file's text with its local includes inlined, ready for NVRTC or cupy.RawModule."""
    out: list[str] = []
    path = Path(path).resolve()
    _expand(path, {path}, out)
    return "\n".join(out) + "\n"

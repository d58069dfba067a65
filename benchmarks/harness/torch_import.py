"""PyTorch, when installed, for the side-by-side comparisons (None when it is not).

PyTorch's bundled libgomp keeps each worker spinning for GOMP_SPINCOUNT = 300000
iterations (~3.5 ms here: pause is ~11 ns) after every parallel op. Timed
interleaved in one process, that spinning worker holds the core the native
kernels' helper needs, and add_scale right after a torch op runs on one thread
(2^24 elements: ~41 GB/s instead of ~55; 2^18: 47-67 instead of ~190). The native
helpers spin 50 us; 5000 iterations (~57 us) give torch's workers the same idle
spin, so neither pool holds cores the other needs. Torch's own figures move by
0-8% with it (2^18: 171-189 GB/s vs 177-186 by default; 2^24: 48-52 vs 50-53);
1000 iterations would be too short and slow torch down (2^18: 29-200 GB/s).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["TORCH_GOMP_SPINCOUNT", "ImportedTorch", "import_torch"]

TORCH_GOMP_SPINCOUNT = "5000"


@dataclass(frozen=True)
class ImportedTorch:
    """The torch module and the OpenMP idle spin its workers got (recorded in the results)."""

    module: Any
    gomp_spincount: str


def import_torch(device: str, match_spin: bool) -> ImportedTorch | None:
    """torch (built with CUDA for a ``"cuda"`` run), or None. With ``match_spin``, its OpenMP
    workers' idle spin is matched to the native pool's when torch is first imported here
    (libgomp reads GOMP_SPINCOUNT once, when it loads)."""
    saved = os.environ.get("GOMP_SPINCOUNT")
    policy = os.environ.get("OMP_WAIT_POLICY")
    if "torch" in sys.modules:
        spin = "unknown: torch was imported before the benchmark"
    elif saved is not None or policy is not None:
        spin = f"the user's: GOMP_SPINCOUNT={saved}, OMP_WAIT_POLICY={policy}"
    elif match_spin and device == "cpu":
        os.environ["GOMP_SPINCOUNT"] = TORCH_GOMP_SPINCOUNT
        spin = TORCH_GOMP_SPINCOUNT
    else:
        spin = "libgomp's default (300000)"
    try:
        import torch
    except Exception:  # not installed, or a broken install: the comparison is skipped either way
        return None
    finally:
        # libgomp has read it by now; child processes get the user's environment back
        if saved is None:
            os.environ.pop("GOMP_SPINCOUNT", None)
    if device == "cuda" and not torch.cuda.is_available():
        return None
    return ImportedTorch(torch, spin)

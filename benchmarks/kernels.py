"""Kernel microbenchmark (issue 7): the fused accumulation kernels against NumPy, PyTorch
and the measured copy/triad bandwidth, side by side. See minitorch_accum/bench/kernels.py.

    python benchmarks/kernels.py --quick
    python benchmarks/kernels.py                    # full CPU mode, results in benchmarks/results/
    python benchmarks/kernels.py --device cuda      # on a machine with a GPU and CuPy
"""

from __future__ import annotations

import sys

from minitorch_accum.bench.kernels import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

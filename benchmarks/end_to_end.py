"""End-to-end accumulation benchmark (issue 7): overhead per micro-batch, peak memory,
items/s and PyTorch eager, side by side. See minitorch_accum/bench/end_to_end.py.

    python benchmarks/end_to_end.py --quick
    python benchmarks/end_to_end.py                 # full mode, results in benchmarks/results/
"""

from __future__ import annotations

import sys

from minitorch_accum.bench.end_to_end import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

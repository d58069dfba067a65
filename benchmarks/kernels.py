"""Kernel microbenchmark: the fused accumulation kernels against NumPy, PyTorch and the
measured copy/triad bandwidth, side by side (the code: benchmarks/kernels/).

    python benchmarks/kernels.py --quick            # results in benchmarks/results/quick/
    python benchmarks/kernels.py                    # the recorded run: benchmarks/results/
    python benchmarks/kernels.py --device cuda --out DIR
"""

import sys
from pathlib import Path

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.kernels.main import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Op-level benchmark of the fused layer kernels and the weight-gradient GEMM against PyTorch's
ops, side by side, with every thread pool pinned to the same count (the code:
benchmarks/layer_ops/).

    python benchmarks/layer_ops.py --quick          # results in benchmarks/results/quick/
    python benchmarks/layer_ops.py                  # the recorded run: benchmarks/results/
    python benchmarks/layer_ops.py --threads 2
"""

import sys
from pathlib import Path

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.layer_ops.main import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

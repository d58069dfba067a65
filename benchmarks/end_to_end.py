"""End-to-end accumulation benchmark: overhead per micro-batch, peak memory, items/s and
PyTorch eager, side by side (the code: benchmarks/end_to_end/).

    python benchmarks/end_to_end.py --quick         # results in benchmarks/results/quick/
    python benchmarks/end_to_end.py                 # the recorded run: benchmarks/results/
    python benchmarks/end_to_end.py --device cuda --quick --out DIR
"""

import sys
from pathlib import Path

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.end_to_end.main import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

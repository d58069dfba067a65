"""Ours against PyTorch eager, each side in its own process, 1 and 2 threads (the code:
benchmarks/end_to_end/versus.py and side.py).

    python benchmarks/end_to_end_versus.py --quick      # results in benchmarks/results/quick/
    python benchmarks/end_to_end_versus.py              # the recorded run: benchmarks/results/
"""

import sys
from functools import partial
from pathlib import Path

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.end_to_end.versus import VERSUS  # noqa: E402  (after the path is set)
from benchmarks.harness import program  # noqa: E402

if __name__ == "__main__":
    sys.exit(partial(program.main, VERSUS)(sys.argv[1:]))

"""All-reduce benchmark: the window's reduction of the gradient arena over R ranks against the
measured memory copy, and the optimizer-step time of R=1 against R=2 for one global batch
(the code: benchmarks/all_reduce/; ranks are started with the venv's mpiexec).

    python benchmarks/all_reduce.py --quick         # results in benchmarks/results/quick/
    python benchmarks/all_reduce.py                 # the recorded run: benchmarks/results/
"""

import sys
from pathlib import Path

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.all_reduce.main import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

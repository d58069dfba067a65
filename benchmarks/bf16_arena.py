"""The character transformer trained with a float32, a bfloat16 round-to-nearest and a bfloat16
stochastically rounded gradient arena, the same steps each: validation loss, gradient memory (the
code: benchmarks/bf16_arena/).

    python benchmarks/bf16_arena.py --quick         # results in benchmarks/results/quick/
    python benchmarks/bf16_arena.py                 # the recorded run: benchmarks/results/
"""

import sys
from pathlib import Path

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmarks.bf16_arena.main import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

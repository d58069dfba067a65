"""What the check of saved inputs costs a micro-batch of the character transformer (forward and
``Accumulator.backward``, 1 thread): with no checksum (the version counter alone), with the
leaves' arrays hashed (the default: parameters, batches, constants), and with every saved array
hashed (``mta.autodiff.detect_raw_writes(True)``). The three are timed interleaved, medians.

    python benchmarks/saved_checks.py [--sizes 8,32] [--repeats 31] [--json FILE]
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

import numpy as np  # noqa: E402  (after the path is set)
from threadpoolctl import threadpool_limits  # noqa: E402

import minitorch_accum as mta  # noqa: E402
from benchmarks.end_to_end.cases import CHARS  # noqa: E402
from benchmarks.harness.timing import median, time_interleaved  # noqa: E402
from minitorch_accum.accum import Accumulator  # noqa: E402
from minitorch_accum.autodiff import saved_versions  # noqa: E402
from minitorch_accum.durable_files import UnwritableOutputError, check_output_path  # noqa: E402

MICRO_BATCHES = 4  # one window; the time is per micro-batch


def _window(b: int) -> Any:
    rng = np.random.default_rng(0)
    model = CHARS.model("cpu", rng)
    x, y = CHARS.data(b * MICRO_BATCHES, rng)
    batches = [(mta.tensor(x[i * b:(i + 1) * b]), mta.tensor(y[i * b:(i + 1) * b])) for i in range(MICRO_BATCHES)]
    acc = Accumulator(model, steps=MICRO_BATCHES)

    def run() -> None:
        acc.zero()
        for xb, yb in batches:
            acc.backward(CHARS.loss(model, xb, yb), num_items=xb.numel())

    return model, run


def _variant(run: Any, mode: str) -> Any:
    hashed = saved_versions.checksum

    def timed() -> None:
        # "none" takes the checksum away (the version counter alone); "all" turns the debug setting on
        if mode == "none":
            saved_versions.checksum = lambda _array: None
        try:
            with saved_versions.detect_raw_writes(mode == "all"):
                run()
        finally:
            saved_versions.checksum = hashed

    return timed


def measure(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    rows = []
    with threadpool_limits(limits=1):
        for b in sizes:
            model, run = _window(b)
            samples = time_interleaved({mode: _variant(run, mode) for mode in ("none", "leaves", "all")},
                                       repeats=repeats, warmup=3)
            ms = {mode: 1e3 * median(times) / MICRO_BATCHES for mode, times in samples.items()}
            rows.append({"b": b, "parameters": sum(p.numel() for p in model.parameters()), "ms_per_micro_batch": ms,
                         "percent_over_none": {m: 100 * (ms[m] / ms["none"] - 1) for m in ("leaves", "all")}})
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/saved_checks.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,32", help="micro-batch sizes b, comma-separated")
    parser.add_argument("--repeats", type=int, default=31, help="timed rounds")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.json:
        try:
            check_output_path(args.json, "--json")  # refused before measuring, not after
        except UnwritableOutputError as exc:
            print(f"{parser.prog}: {exc}", file=sys.stderr)
            return 2
    rows = measure([int(b) for b in args.sizes.split(",")], args.repeats)
    print(f"char transformer ({rows[0]['parameters']} parameters), ms per micro-batch, 1 thread")
    print(f"{'b':>4} {'none':>9} {'leaves':>9} {'all':>9} {'leaves %':>9} {'all %':>8}")
    for row in rows:
        ms, pct = row["ms_per_micro_batch"], row["percent_over_none"]
        print(f"{row['b']:>4} {ms['none']:>9.3f} {ms['leaves']:>9.3f} {ms['all']:>9.3f} "
              f"{pct['leaves']:>+8.2f}% {pct['all']:>+7.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

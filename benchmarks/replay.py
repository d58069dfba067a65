"""What replaying a captured micro-batch saves (``autodiff.Replay``, the Learner's default): ms per
micro-batch eager and replayed, timed interleaved in one process (medians, BLAS and every pool at
1 thread, freed memory kept as the commands keep it), on the character transformer and the digits
MLP at b = 8 and 32; and where a micro-batch's CPU time goes, eager and replayed, sampled by
``perf`` when the machine has it: the Python interpreter (libpython), NumPy, BLAS, the native
kernels, the kernel (page faults). Targets (issue 27): replayed <= 0.7x eager at b = 8, Python
under 10% of a replayed micro-batch; reported, never asserted.

    python benchmarks/replay.py [--sizes 8,32] [--repeats 31] [--seconds 4] [--no-perf] [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

import numpy as np  # noqa: E402  (after the path is set)

import minitorch_accum as mta  # noqa: E402
from benchmarks.end_to_end.cases import CHARS, DIGITS  # noqa: E402
from benchmarks.harness.machine import loadavg, machine_info  # noqa: E402
from benchmarks.harness.results import results_dir, write_results  # noqa: E402
from benchmarks.harness.timing import median, time_interleaved  # noqa: E402
from minitorch_accum.accum import Accumulator  # noqa: E402
from minitorch_accum.backend import retain_freed_memory  # noqa: E402

MICRO_BATCHES = 4  # one window; times are per micro-batch
CASES = {"char_transformer": CHARS, "digits_mlp": DIGITS}
#: perf's shared objects, in the groups the result reports
GROUPS = {"python": ("libpython",), "numpy": ("_multiarray_umath", "_umath"), "blas": ("openblas", "libblas"),
          "native kernels": ("_native.",), "os kernel": ("[kernel",), "libc": ("libc.so", "libm.so")}


def _window(case_name: str, b: int, mode: str) -> Any:
    """A run of one window of MICRO_BATCHES micro-batches, eager or replayed (warmed to replay)."""
    case = CASES[case_name]
    rng = np.random.default_rng(0)
    model = case.model("cpu", rng)
    x, y = case.data(b * MICRO_BATCHES, rng)
    batches = [(mta.tensor(x[i * b:(i + 1) * b]), mta.tensor(y[i * b:(i + 1) * b])) for i in range(MICRO_BATCHES)]
    acc = Accumulator(model, steps=MICRO_BATCHES)

    def loss(xb: Any, yb: Any) -> Any:
        return case.loss(model, xb, yb)

    step = acc.capture(loss) if mode == "replayed" else loss

    def run() -> None:
        acc.zero()
        for xb, yb in batches:
            acc.backward(step(xb, yb), num_items=yb.numel())

    run()  # captured and checked: every later micro-batch of this shape replays
    if mode == "replayed":
        run()
        assert step.last is not None and step.last.outcome == "replayed", step.last
    return run


def timings(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for case_name in CASES:
        for b in sizes:
            samples = time_interleaved({mode: _window(case_name, b, mode) for mode in ("eager", "replayed")},
                                       repeats=repeats, warmup=3)
            ms = {mode: 1e3 * median(times) / MICRO_BATCHES for mode, times in samples.items()}
            rows.append({"model": case_name, "b": b, "ms_per_micro_batch": ms,
                         "replayed_over_eager": ms["replayed"] / ms["eager"]})
    return rows


def _loop(case_name: str, b: int, mode: str, seconds: float) -> None:
    """Windows of one variant for ``seconds`` after saying ``ready`` (what perf samples: the
    steady state, not the imports and the capture before it)."""
    run = _window(case_name, b, mode)
    run()
    print("ready", flush=True)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        run()


def cpu_shares(case_name: str, b: int, mode: str, seconds: float) -> dict[str, float] | None:
    """Shares of the CPU samples of ``seconds`` of one variant, by group of GROUPS; None without perf."""
    perf = shutil.which("perf")
    if perf is None:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "perf.data"
        child = subprocess.Popen([sys.executable, __file__, "--loop", case_name, str(b), mode, str(seconds + 2)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        child.stdout.readline()  # "ready": warmed up, replaying
        recorded = subprocess.run([perf, "record", "-F", "999", "-p", str(child.pid), "-o", str(data), "--",
                                   "sleep", str(seconds)], capture_output=True, text=True)
        child.wait()
        if recorded.returncode != 0:
            return None
        report = subprocess.run([perf, "report", "-i", str(data), "--stdio", "--sort", "dso"],
                                capture_output=True, text=True).stdout
    shares = dict.fromkeys([*GROUPS, "other"], 0.0)
    for line in report.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].endswith("%") or line.lstrip().startswith("#"):
            continue
        share, dso = float(parts[0].rstrip("%")), " ".join(parts[1:])
        group = next((name for name, marks in GROUPS.items() if any(mark in dso for mark in marks)), "other")
        shares[group] += share
    return {name: round(value, 2) for name, value in shares.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/replay.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,32", help="micro-batch sizes b, comma-separated")
    parser.add_argument("--repeats", type=int, default=31, help="timed rounds (each a window of each variant)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds perf samples each variant")
    parser.add_argument("--no-perf", action="store_true", help="time only: no CPU shares")
    parser.add_argument("--out", default=None, help="directory of the result files (default: benchmarks/results)")
    parser.add_argument("--loop", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    mta.set_threads(1)
    retain_freed_memory()  # as the commands run: each micro-batch reuses the last one's memory
    if args.loop:
        case_name, b, mode, seconds = args.loop
        _loop(case_name, int(b), mode, float(seconds))
        return 0
    sizes = [int(b) for b in args.sizes.split(",")]
    load_before = loadavg()
    rows = timings(sizes, args.repeats)
    for row in rows:
        if not args.no_perf:
            row["cpu_shares_percent"] = {mode: cpu_shares(row["model"], row["b"], mode, args.seconds)
                                         for mode in ("eager", "replayed")}
    print(f"ms per micro-batch, 1 thread, medians of {args.repeats} interleaved windows of {MICRO_BATCHES}")
    print(f"{'model':<18} {'b':>3} {'eager':>8} {'replayed':>9} {'ratio':>6}  python share eager -> replayed (perf)")
    for row in rows:
        ms = row["ms_per_micro_batch"]
        shares = row.get("cpu_shares_percent") or {}
        python = ("-" if not shares or shares.get("eager") is None
                  else f"{shares['eager']['python']:.1f}% -> {shares['replayed']['python']:.1f}%")
        print(f"{row['model']:<18} {row['b']:>3} {ms['eager']:>8.3f} {ms['replayed']:>9.3f} "
              f"{row['replayed_over_eager']:>6.3f}  {python}")
    payload = {"benchmark": "replay", "settings": {"sizes": sizes, "repeats": args.repeats, "threads": 1,
                                                   "micro_batches_per_window": MICRO_BATCHES, "device": "cpu"},
               "machine": {**machine_info(), "load_before": load_before, "load_after": loadavg()},
               "targets": {"replayed_over_eager_at_b8": 0.7, "python_share_of_replayed_percent": 10},
               "rows": rows}
    recorded = args.sizes == "8,32" and args.repeats == 31 and not args.no_perf
    files = write_results("replay", payload, results_dir(args.out, recorded))
    print(f"wrote {files.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

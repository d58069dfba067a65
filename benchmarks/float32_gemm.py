"""The float32 GEMM of our own (``kernels.gemm``, csrc/native/sgemm_cpu.cpp) against NumPy's OpenBLAS
and PyTorch's BLAS on the models' own products: every forward GEMM of the character transformer
(b = 32) and of nanoGPT's CPU configuration (b = 12), with the input and weight gradients' products
of each (dX = dY W^T, dW = X^T dY), as the layers call them. One thread everywhere (the native
pool, OpenBLAS, PyTorch); the three libraries timed interleaved, call by call, in one process, on
warm operands (the products take 20-45% longer inside a model, whose activations come from beyond
L2). The BLAS kernel that ran is in the header: run it as the environment is and with
``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` set or unset to compare OpenBLAS's kernels; ours
does not depend on them.

    python benchmarks/float32_gemm.py [--repeats 15] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

# Run as a file, Python puts benchmarks/ first on the path; the program imports the
# benchmarks package and the checkout's minitorch_accum from the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

import numpy as np  # noqa: E402  (after the path is set)

import minitorch_accum as mta  # noqa: E402
import minitorch_accum.kernels as K  # noqa: E402
from benchmarks.end_to_end.cases import CHARS, NANOGPT_CPU  # noqa: E402
from benchmarks.end_to_end.roofline import gemm_shapes  # noqa: E402
from benchmarks.harness.machine import blas_line, loadavg, machine_info  # noqa: E402
from benchmarks.harness.results import results_dir, write_results  # noqa: E402
from benchmarks.harness.timing import median, time_interleaved  # noqa: E402
from minitorch_accum.backend.blas import native_gemm  # noqa: E402

MODELS = {"char_transformer": (CHARS, 32), "nanogpt_cpu": (NANOGPT_CPU, 12)}
CALLS_PER_SAMPLE = 10  # one sample times this many calls (a call is 40-700 us)


def _products(case: Any, b: int) -> list[tuple[str, int, int, int, bool, bool]]:
    """(kind, M, K, N, trans_a, trans_b) of each product, with the transposes the layers pass."""
    kinds = ("forward", "input gradient", "weight gradient")
    out = []
    for index, (m, k, n) in enumerate(gemm_shapes(case, b)):
        kind = kinds[index % 3]
        out.append((kind, m, k, n, kind == "weight gradient", kind == "input gradient"))
    return out


def _variants(m: int, k: int, n: int, trans_a: bool, trans_b: bool, torch: Any) -> dict[str, Any]:
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a = rng.standard_normal((k, m) if trans_a else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n), dtype=np.float32)
    op_a, op_b = (a.T if trans_a else a), (b.T if trans_b else b)
    ours_out, numpy_out = np.empty((m, n), np.float32), np.empty((m, n), np.float32)

    def repeat(call: Any) -> Any:
        def run() -> None:
            for _ in range(CALLS_PER_SAMPLE):
                call()
        return run

    variants = {"ours": repeat(lambda: K.gemm(ours_out, a, trans_a, b, trans_b, 1.0, 0.0)),
                "numpy": repeat(lambda: np.matmul(op_a, op_b, out=numpy_out))}
    if torch is not None:
        t_a, t_b = torch.from_numpy(a), torch.from_numpy(b)
        t_a, t_b = (t_a.t() if trans_a else t_a), (t_b.t() if trans_b else t_b)
        variants["torch"] = repeat(lambda: torch.mm(t_a, t_b))
    return variants


def measure(repeats: int) -> dict[str, Any]:
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        torch = None
    rows = []
    for model, (case, b) in MODELS.items():
        for kind, m, k, n, trans_a, trans_b in _products(case, b):
            samples = time_interleaved(_variants(m, k, n, trans_a, trans_b, torch), repeats=repeats, warmup=2)
            us = {side: 1e6 * median(times) / CALLS_PER_SAMPLE for side, times in samples.items()}
            rows.append({"model": model, "kind": kind, "m": m, "k": k, "n": n, "trans_a": trans_a,
                         "trans_b": trans_b, "us": us, "gflops": {s: 2 * m * k * n / t / 1e3 for s, t in us.items()}})
    totals: dict[str, dict[str, float]] = {}
    for model in MODELS:
        mine = [row for row in rows if row["model"] == model]
        totals[model] = {side: sum(row["us"][side] for row in mine) / 1e3 for side in mine[0]["us"]}
    return {"rows": rows, "totals_ms": totals}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/float32_gemm.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="interleaved rounds (each 10 calls of each library)")
    parser.add_argument("--out", default=None, help="directory of the result files (default: benchmarks/results)")
    args = parser.parse_args(argv)
    if native_gemm() is None:
        print("float32_gemm: needs the native module and NumPy's bundled OpenBLAS", file=sys.stderr)
        return 2
    mta.set_threads(1)
    machine = machine_info()
    load_before = loadavg()
    result = measure(args.repeats)
    print(blas_line(machine))
    print(f"float32 products of the models, 1 thread, median of {args.repeats} interleaved rounds of "
          f"{CALLS_PER_SAMPLE} calls; ms per micro-batch's products (sum over them)")
    for model, sides in result["totals_ms"].items():
        ours = sides["ours"]
        others = ", ".join(f"{side} {ms:.2f} ms ({ms / ours:.2f}x ours' time)" for side, ms in sides.items()
                           if side != "ours")
        print(f"  {model}: ours {ours:.2f} ms, {others}")
    payload = {"benchmark": "float32_gemm",
               "settings": {"repeats": args.repeats, "calls_per_sample": CALLS_PER_SAMPLE, "threads": 1,
                            "models": {model: b for model, (_, b) in MODELS.items()}},
               "machine": {**machine, "load_before": load_before, "load_after": loadavg()}, **result}
    # a run under a forced OpenBLAS kernel keeps its own file beside the run as the machine picks
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    name = "float32_gemm" + (f"-openblas-{coretype.lower()}" if coretype else "")
    files = write_results(name, payload, results_dir(args.out, args.repeats == 15))
    print(f"wrote {files.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Entry point of the ``maccum`` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from minitorch_accum.cli.train_command import add_training_arguments

    parser = argparse.ArgumentParser(prog="maccum", description="Gradient accumulation: train, compare, explain, "
                                     "measure.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a built-in task with gradient accumulation")
    add_training_arguments(train)
    train.add_argument("--out", default="runs/train", help="directory for metrics, checkpoints, final parameters")
    train.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    train.add_argument("--checkpoint-every", type=int, default=10, help="optimizer steps between checkpoints")
    train.add_argument("--progress", choices=("auto", "rich", "plain", "none"), default="auto")

    compare = sub.add_parser("compare", help="k x b against k*b and b, from the same seed")
    add_training_arguments(compare)
    compare.add_argument("--out", default="runs/compare")
    compare.add_argument("--progress", choices=("auto", "rich", "plain", "none"), default="auto")

    explain = sub.add_parser("explain", help="one window, kernel by kernel, checked against the big batch")
    explain.add_argument("--dataset", choices=("digits", "sequences"), default="digits")
    explain.add_argument("--accum", type=int, default=4)
    explain.add_argument("--micro-batch", type=int, default=8)
    explain.add_argument("--reduction", choices=("items", "mean", "sum"), default="items")
    explain.add_argument("--fusion", choices=("leaf", "gemm", "none"), default="gemm")
    explain.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    explain.add_argument("--seed", type=int, default=0)

    bench = sub.add_parser("bench", help="kernel and end-to-end benchmarks (see benchmarks/)")
    bench.add_argument("which", choices=("kernels", "end-to-end"))
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")

    kernels = sub.add_parser("kernels", help="list the kernels, compile them through NVRTC, show resources")
    kernels.add_argument("rest", nargs=argparse.REMAINDER, help="list | compile [--arch sm_90] [--resource-usage]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "train":
            from minitorch_accum.cli.train_command import train_command

            return train_command(args)
        if args.command == "compare":
            from minitorch_accum.cli.compare_command import compare_command

            return compare_command(args)
        if args.command == "explain":
            from minitorch_accum.cli.explain_command import explain_command

            return explain_command(args)
        if args.command == "bench":
            # The benchmarks are programs of the source repository, not of the installed package:
            # run the checkout's, found above the package (editable install) or the working directory.
            import subprocess
            from pathlib import Path

            script = Path("benchmarks", args.which.replace("-", "_") + ".py")
            roots = [Path(__file__).resolve().parents[2], Path.cwd(), *Path.cwd().parents]
            found = next((r / script for r in roots if (r / script).is_file() and (r / "pyproject.toml").is_file()),
                         None)
            if found is None:
                print(f"maccum bench: {script} not found: the benchmarks are programs of the source repository, "
                      "not part of the installed package; run this command inside a checkout of minitorch_accum "
                      f"(or run python {script} there)", file=sys.stderr)
                return 2
            return subprocess.call([sys.executable, str(found), *args.rest])
        from minitorch_accum.kernels.__main__ import main as kernels_main

        return kernels_main(args.rest)
    except (ValueError, TypeError, RuntimeError) as exc:
        print(f"maccum {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"maccum {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

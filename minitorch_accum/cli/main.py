"""Entry point of the ``maccum`` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]

_PROGRESS = ("auto", "rich", "plain", "none")


def _command(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    # every option's help line shows its default
    return sub.add_parser(name, help=help_text, description=help_text,
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    from minitorch_accum.cli.train_command import add_training_arguments

    parser = argparse.ArgumentParser(prog="maccum", description="Gradient accumulation: train, compare, explain, "
                                     "measure.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = _command(sub, "train", "train a built-in task with gradient accumulation (data-parallel under mpiexec)")
    add_training_arguments(train)
    train.add_argument("--out", default="runs/train", help="directory for metrics, checkpoints, final parameters")
    train.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    train.add_argument("--overwrite", action="store_true",
                       help="start afresh in an --out that already holds a run (its files are replaced)")
    train.add_argument("--allow-config-change", action="store_true",
                       help="with --resume: continue even if settings differ from the checkpoint's (says which)")
    train.add_argument("--checkpoint-every", type=int, default=10, help="optimizer steps between checkpoints")
    train.add_argument("--distributed", choices=("auto", "mpi", "nccl", "local"), default="auto",
                       help="communicator: auto = MPI when started by mpiexec with more than one rank")
    train.add_argument("--zero", action="store_true",
                       help="ZeRO-1: shard the reduced gradient and the optimizer state over the ranks")
    train.add_argument("--overlap", action="store_true",
                       help="start each bucket's reduction during the window's last backward (data-parallel)")
    train.add_argument("--progress", choices=_PROGRESS, default="auto", help="progress display (rank 0 only)")

    compare = _command(sub, "compare", "k x b against k*b and b, from the same seed")
    add_training_arguments(compare)
    # the transformer shows the memory story in megabytes, where the digits MLP has kilobytes
    compare.set_defaults(dataset="chars")
    compare.add_argument("--out", default="runs/compare", help="directory for the runs, compare.png and compare.md")
    compare.add_argument("--progress", choices=_PROGRESS, default="auto", help="progress display")

    explain = _command(sub, "explain", "one window, kernel by kernel, checked against the big batch")
    explain.add_argument("--dataset", choices=("digits", "sequences", "chars"), default="digits",
                         help="built-in task (chars: the character transformer over Shakespeare)")
    explain.add_argument("--accum", type=int, default=4, help="micro-batches in the window (k)")
    explain.add_argument("--micro-batch", type=int, default=8, help="items per micro-batch (b)")
    explain.add_argument("--reduction", choices=("items", "mean", "sum"), default="items", help="normalization")
    explain.add_argument("--fusion", choices=("leaf", "gemm", "none"), default="gemm", help="where gradients land")
    explain.add_argument("--dtype", choices=("float32", "float64"), default="float64", help="parameter dtype")
    explain.add_argument("--seed", type=int, default=0, help="seed of the model and the data order")
    explain.add_argument("--block-size", type=int, default=None,
                         help="characters per window (--dataset chars; default: the task's)")

    bench = _command(sub, "bench", "kernel and end-to-end benchmarks (programs of a checkout's benchmarks/)")
    bench.add_argument("which", choices=("kernels", "end-to-end", "all-reduce"), help="which benchmark")
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")

    kernels = _command(sub, "kernels", "list the kernels, compile them through NVRTC, show resources")
    kernels.add_argument("rest", nargs=argparse.REMAINDER, help="list | compile [--arch sm_90] [--resource-usage]")
    return parser


def _bench(which: str, rest: list[str]) -> int:
    # The benchmarks are programs of the source repository, not of the installed package:
    # run the checkout's, found above the package (editable install) or the working directory.
    import subprocess
    from pathlib import Path

    script = Path("benchmarks", which.replace("-", "_") + ".py")
    roots = [Path(__file__).resolve().parents[2], Path.cwd(), *Path.cwd().parents]
    found = next((r / script for r in roots if (r / script).is_file() and (r / "pyproject.toml").is_file()), None)
    if found is None:
        print(f"maccum bench: {script} not found: the benchmarks are programs of the source repository, "
              "not part of the installed package; run this command inside a checkout of minitorch_accum "
              f"(or run python {script} there)", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, str(found), *rest])


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from minitorch_accum.train import TrainingInterrupted

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
            return _bench(args.which, args.rest)
        from minitorch_accum.kernels.__main__ import main as kernels_main

        return kernels_main(args.rest)
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        print(f"maccum {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except TrainingInterrupted as stop:
        # a checkpoint was saved; the status is what a shell reports for the signal (130 Ctrl-C, 143 SIGTERM)
        print(f"maccum {args.command}: {stop}", file=sys.stderr)
        return stop.exit_status
    except KeyboardInterrupt:
        print(f"maccum {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

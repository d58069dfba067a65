"""Entry point of the ``maccum`` console script."""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from minitorch_accum.train.progress import write_line
from minitorch_accum.train.settings import TRAINING_COMMANDS, add_options, check_outputs, read_options, typed_options

__all__ = ["build_parser", "main"]

# each command's own defaults, where they differ from the settings table's command-line defaults
_COMMAND_DEFAULTS: dict[str, dict[str, Any]] = {
    # the transformer shows the memory story in megabytes, where the digits MLP has kilobytes
    "compare": {"dataset": "chars", "out": "runs/compare"},
    # one small window, in float64 so the check against the big batch is exact to rounding
    "explain": {"grads_accumulation": 4, "micro_batch": 8, "dtype": "float64"},
}
_HELP = {
    "train": "train a built-in task with gradient accumulation (data-parallel under mpiexec)",
    "compare": "k x b against k*b and b, from the same seed",
    "explain": "one window, kernel by kernel, checked against the big batch",
    "generate": "sample text from a trained chars run (maccum train --dataset chars --out DIR)",
}


class _Parser(argparse.ArgumentParser):
    """argparse's parser that names the option or choice closest to one it does not know (Python
    3.14's ``suggest_on_error``, for 3.11), each command's parser with its own usage: the commands'
    parsers are of this class too (``add_subparsers`` makes them of its parser's class)."""

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:  # refused here, by the parser of the command they were given to, not by maccum's
            self.error(f"unrecognized arguments: {' '.join(extras)}{self._suggestion(extras)}")
        return parsed, extras

    def _suggestion(self, extras: list[str]) -> str:
        known = [option for option in self._option_string_actions if option.startswith("--")]
        options = [extra.split("=", 1)[0] for extra in extras if extra.startswith("-")]
        closest = {option: close[0] for option in options if (close := difflib.get_close_matches(option, known, n=1))}
        if not closest:
            return ""
        if len(options) == 1:
            return f" (did you mean {closest[options[0]]}?)"
        return f" (did you mean {', '.join(f'{near} for {option}' for option, near in closest.items())}?)"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and isinstance(value, str) and value not in choices:
            close = difflib.get_close_matches(value, [str(c) for c in choices], n=1)
            if close:
                raise argparse.ArgumentError(action, f"invalid choice: {value!r}, did you mean {close[0]!r}? (choose "
                                                     f"from {', '.join(repr(str(c)) for c in choices)})")
        super()._check_value(action, value)


def _command(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    # every option's help line shows its default
    return sub.add_parser(name, help=help_text, description=help_text,
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="maccum", description="Gradient accumulation: train, compare, explain, "
                                     "generate, measure, precision, and the bugs it is known for.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in TRAINING_COMMANDS:  # their options are the rows of the settings table
        add_options(_command(sub, command, _HELP[command]), command, _COMMAND_DEFAULTS.get(command))

    from minitorch_accum.cli.generate_command import add_generate_options

    add_generate_options(_command(sub, "generate", _HELP["generate"]))

    bench = _command(sub, "bench", "kernel and end-to-end benchmarks (programs of a checkout's benchmarks/)")
    bench.add_argument("which", choices=("kernels", "end-to-end", "end-to-end-versus", "layer-ops", "all-reduce"),
                       help="which benchmark")
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="arguments passed to the benchmark")

    kernels = _command(sub, "kernels", "list the kernels, compile them through NVRTC, show resources")
    kernels.add_argument("rest", nargs=argparse.REMAINDER, help="list | compile [--arch sm_90] [--resource-usage]")

    bugs = _command(sub, "bugs", "the bug museum: real accumulation bugs, reproduced and caught by a property")
    bugs.add_argument("action", choices=("list", "show"), help="list the exhibits, or show one measured")
    bugs.add_argument("name", nargs="?", help="the exhibit to show (maccum bugs list names them)")
    bugs.add_argument("--code", action="store_true", help="show: print the faulty code under the correct code")

    from minitorch_accum.cli.precision_command import add_precision_parser

    add_precision_parser(sub, argparse.ArgumentDefaultsHelpFormatter)
    return parser


def _check_outputs(values: dict[str, Any], command: str) -> None:
    """``check_outputs`` on every rank of the launch: a refusal on any rank stops every rank, each with
    the same one line (under mpiexec, one rank exiting first would otherwise end the others unheard)."""
    from minitorch_accum.distributed.launch import make_communicator
    from minitorch_accum.distributed.rank_agreement import stop_if_any_rank_failed

    comm = make_communicator("auto")
    failure: OSError | None = None
    try:
        check_outputs(values, command)
        if command == "explain":  # each rank's own trace and the snapshot beside it, not only the name given
            from minitorch_accum.cli.explain_views import check_view_paths

            check_view_paths(values, comm)
    except OSError as error:
        failure = error
    stop_if_any_rank_failed(comm, failure)


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
        if args.command in TRAINING_COMMANDS:
            values = read_options(args, args.command)
            _check_outputs(values, args.command)  # an output that cannot be written is refused before any work
            from minitorch_accum.backend import retain_freed_memory, set_threads

            set_threads(values.get("threads"))  # every CPU pool, before the first matmul
            retain_freed_memory()  # each micro-batch reuses the last one's memory, without page faults
            if args.command == "train":
                from minitorch_accum.cli.train_command import train_command

                return train_command(values, typed_options(args))
            if args.command == "compare":
                from minitorch_accum.cli.compare_command import compare_command

                return compare_command(values)
            from minitorch_accum.cli.explain_command import explain_command

            return explain_command(values)
        if args.command == "generate":
            from minitorch_accum.cli.generate_command import generate_command

            return generate_command(args)
        if args.command == "bench":
            return _bench(args.which, args.rest)
        if args.command == "bugs":
            from minitorch_accum.cli.bugs_command import bugs_command

            return bugs_command(args.action, args.name, code=args.code)
        if args.command == "precision":
            from minitorch_accum.cli.precision_command import precision_command

            return precision_command(args)
        from minitorch_accum.kernels.__main__ import main as kernels_main

        return kernels_main(args.rest, prog="maccum kernels")
    except BrokenPipeError:
        # the reader went away (| head): stop quietly, as a command killed by SIGPIPE does; what is
        # left in stdout's buffer goes nowhere, so that flushing it at exit raises nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except (ValueError, TypeError, RuntimeError, OSError) as exc:
        # one write: under mpiexec the lines of several ranks then never interleave
        sys.stderr.write(f"maccum {args.command}: error: {exc}\n")
        sys.stderr.flush()
        from minitorch_accum.distributed.rank_agreement import RanksDisagreeError

        if isinstance(exc, RanksDisagreeError):
            exc.wait_for_every_rank()  # every rank says it before the first to exit ends the job
        return 2
    except TrainingInterrupted as stop:
        # a checkpoint was saved; the status is what a shell reports for the signal (130 Ctrl-C, 143 SIGTERM)
        sys.stderr.write(f"maccum {args.command}: {stop}\n")
        sys.stderr.flush()
        stop.wait_for_every_rank()
        return stop.exit_status
    except KeyboardInterrupt:
        write_line(f"maccum {args.command}: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())

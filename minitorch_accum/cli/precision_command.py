"""``maccum precision``: how the error of the window gradient grows with k, for each dtype.

The model's micro-batch gradients (float64, at fixed parameters, as within one window) are
accumulated the six ways of ``observe/precision.py`` and compared with their exact sum; the
command prints the table of relative errors and writes it as JSON and as a log-log figure with
the sqrt(k) * eps and k * eps guide lines and the stochastically rounded row's expected error.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.data import DataLoader
from minitorch_accum.durable_files import check_output_path
from minitorch_accum.observe.precision import (
    STOCHASTIC,
    PrecisionStudy,
    accumulation_errors,
    default_ks,
    micro_batch_gradients,
)
from minitorch_accum.train.setting_kinds import non_negative_int, positive_int

__all__ = ["MODELS", "add_precision_parser", "parse_ks", "precision_command", "run_precision_study"]

#: ``--model``: the task whose model and data give the gradients
MODELS = {"mlp": "digits", "chars": "chars"}


def parse_ks(text: str) -> list[int]:
    """``1,2,4,...,1024`` (``...`` continues the doubling), or plain comma-separated k."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    ks: list[int] = []
    for index, part in enumerate(parts):
        if part == "...":
            if not ks or index + 1 >= len(parts):
                raise argparse.ArgumentTypeError("'...' needs a k before and after it: 1,2,4,...,1024")
            last = int(positive_int(parts[index + 1]))
            k = ks[-1] * 2
            while k < last:
                ks.append(k)
                k *= 2
            continue
        try:
            ks.append(positive_int(part))
        except argparse.ArgumentTypeError:
            # argparse names the option itself: "argument --k: ..."
            raise argparse.ArgumentTypeError(f"each k must be a positive int, got {part!r} in {text!r}") from None
    if not ks:
        raise argparse.ArgumentTypeError(f"needs at least one k, e.g. 1,2,4,...,1024; got {text!r}")
    return sorted(set(ks))


def add_precision_parser(sub: Any, formatter: Any) -> None:
    """The ``precision`` command's options."""
    help_text = ("how accumulation error grows with k: bf16 (to nearest, stochastic rounding), bf16 into float32, "
                 "float32, compensated, float64")
    parser = sub.add_parser("precision", help=help_text, description=help_text, formatter_class=formatter)
    parser.add_argument("--k", type=parse_ks, default=default_ks(), metavar="K,K,...",
                        help="window sizes to measure, e.g. 1,2,4,...,1024 (default: powers of 2 up to 1024)")
    parser.add_argument("--model", choices=tuple(MODELS), default="mlp",
                        help="mlp: the digits MLP; chars: the character transformer (slower)")
    parser.add_argument("--micro-batch", type=positive_int, default=8, help="items (rows) per micro-batch")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seed of the model, of the data order and of the stochastic rounding")
    parser.add_argument("--out", default="runs/precision", help="directory for precision.json and precision.png: "
                        "created with its parents if missing; its nearest existing part must take new files "
                        "(checked before the study runs)")


def run_precision_study(model: str, ks: list[int], micro_batch: int, seed: int = 0) -> PrecisionStudy:
    """The study for the model of ``--model`` (its data, a float64 copy of its initial weights)."""
    manual_seed(seed)
    task = load_task(MODELS[model], dtype="float64")
    loader = DataLoader(task.train, micro_batch, shuffle=True, seed=seed)
    batches = (loader.batch(epoch, index) for epoch in itertools.count() for index in range(len(loader)))
    study = accumulation_errors(micro_batch_gradients(task.model, batches), ks, seed=seed % 2**64)
    study.about = {"model": model, "task": task.description, "micro_batch": micro_batch, "seed": seed,
                   "parameters": sum(p.size for p in task.model.parameters())}
    return study


def precision_command(args: argparse.Namespace) -> int:
    check_output_path(args.out, "--out", directory=True)  # refused now, not after the study
    study = run_precision_study(args.model, args.k, args.micro_batch, args.seed)
    print(f"accumulated window gradient against the exact sum of the same micro-batch gradients, as k grows\n"
          f"model: {study.about['task']}; micro-batches of {args.micro_batch}; "
          f"{study.about['parameters']:,} gradient entries; ||acc - exact|| / ||exact||\n")
    print(study.table())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "precision.json").write_text(json.dumps(study.as_dict(), indent=2))
    from minitorch_accum.cli.precision_figure import save_precision_figure  # matplotlib only here

    figure = save_precision_figure(study, out / "precision.png")
    last = study.ks[-1]
    plain, compensated = study.row("float32").errors[last], study.row("float32 compensated (Neumaier)").errors[last]
    if compensated > 0:
        print(f"\nat k={last}: compensated float32 is {plain / compensated:.0f}x closer than plain float32; "
              "a bfloat16 buffer loses what float32 keeps, and casting bf16 gradients into float32 keeps it")
    nearest, stochastic = study.row("bf16 -> bf16"), study.row(STOCHASTIC)
    if stochastic.errors[last] > 0:
        ratio = nearest.errors[last] / stochastic.errors[last]
        print(f"at k={last}: a bfloat16 buffer rounded stochastically is {ratio:.2f}x closer than one rounded to "
              f"nearest ({stochastic.errors[last]:.2e} against {nearest.errors[last]:.2e}; expected "
              f"{stochastic.expected[last]:.2e}: its errors add like a random walk, about sqrt(k) units)")
    print(f"wrote {out / 'precision.json'} and {figure}")
    return 0

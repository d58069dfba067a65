"""``maccum generate``: text sampled from a trained chars run, so a student can read what it learned.

    maccum train --dataset chars --out runs/chars
    maccum generate --from runs/chars --prompt "MENENIUS:" --tokens 200 --temperature 0.8 --top-k 10

The run's parameters come from ``DIR/final.safetensors``. Which task it trained is read from
the settings the run recorded in its latest checkpoint (``run.dataset``, train/run_settings.py):
a run of another dataset is refused, naming it; a run that kept no checkpoint is recognized by
its parameters' names. The block size and the dtype are the parameters' own (the position
table has a row per character of context), and the model is the chars task's
(``cli/tasks.py``), built exactly as ``maccum train`` built it, with the task's vocabulary
(``data/chars.py``).
Each new character is drawn from the model's last distribution, divided by the temperature
and cut to its ``top-k`` most likely characters (``Tensor.topk``), with ``mta.multinomial``
from a generator seeded by ``--seed``: the same seed gives the same text.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum.autodiff import Tensor, multinomial, no_grad
from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.data import CharDataset
from minitorch_accum.nn import Module, RecordError
from minitorch_accum.train.checkpoint import CheckpointError, FileCheckpointer
from minitorch_accum.train.setting_kinds import Integer, Kind, Number, Optional

__all__ = ["GenerateOptions", "add_generate_options", "generate_command", "generate_text", "load_chars_run",
           "read_generate_options"]


@dataclass(frozen=True)
class GenerateOptions:
    """How ``generate_text`` draws; the defaults are the command line's."""

    tokens: int = 200
    temperature: float = 0.8
    top_k: int | None = 10
    seed: int = 0


#: each option: (flag, field of GenerateOptions, kind, help); the kinds are the settings table's, so a bad
#: value is refused in the table's words ("--tokens must be a positive int, got 0")
_OPTIONS: tuple[tuple[str, str, Kind, str], ...] = (
    ("--tokens", "tokens", Integer(1), "characters to generate after the prompt"),
    ("--temperature", "temperature", Number(positive=True),
     "divides the logits: below 1 sharper and more repetitive, above 1 more random"),
    ("--top-k", "top_k", Optional(Integer(1)), "draw only among the k most likely characters (none or 0: all)"),
    ("--seed", "seed", Integer(0), "seed of the draws: the same seed gives the same text"),
)


def _optional_int(text: str) -> Any:
    return None if text.lower() in ("none", "0") else Integer(1).from_text(text)


def add_generate_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="source", required=True, metavar="DIR", default=argparse.SUPPRESS,
                        help="directory of a finished maccum train --dataset chars run (its final.safetensors)")
    parser.add_argument("--prompt", default="\n",
                        help="text the model continues, in characters of the play (default: %(default)r, a new line)")
    defaults = GenerateOptions()
    for flag, dest, kind, help_text in _OPTIONS:
        reader = _optional_int if isinstance(kind, Optional) else kind.from_text
        parser.add_argument(flag, dest=dest, type=reader, default=getattr(defaults, dest),
                            metavar=flag.lstrip("-").upper().replace("-", "_"), help=help_text)


def read_generate_options(args: argparse.Namespace) -> GenerateOptions:
    """The options checked by their kinds (ValueError naming the option)."""
    values = {dest: kind.check(flag, getattr(args, dest)) for flag, dest, kind, _ in _OPTIONS}
    return GenerateOptions(**values)


def _recorded_run(directory: Path) -> dict[str, Any] | None:
    """The ``run.`` settings of the run's latest intact checkpoint (None when it kept none)."""
    checkpoints = directory / "checkpoints"
    if not checkpoints.is_dir():
        return None
    try:
        loaded = FileCheckpointer(checkpoints).load_checkpoint()
    except CheckpointError:
        return None
    return dict((loaded.state.get("settings") or {}).get("run") or {})


def load_chars_run(directory: str | Path) -> tuple[Module, CharDataset]:
    """The trained chars model of a run directory and the task's vocabulary (as a CharDataset);
    ValueError, one line, when the directory holds no finished chars run."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    directory = Path(directory)
    final = directory / "final.safetensors"
    if not final.is_file():
        raise ValueError(f"{directory} holds no final.safetensors: train first with maccum train --dataset chars "
                         f"--out {directory} (a run writes it when it finishes)")
    try:
        parameters = load_file(str(final))
    except SafetensorError as error:  # cut short or overwritten: the header does not describe the bytes
        raise ValueError(f"{final} is damaged and cannot be read ({error}): it was cut short or overwritten; "
                         f"restore it, or write it anew with maccum train --dataset chars --out {directory} --resume "
                         "(from the run's last checkpoint) or --overwrite") from None
    run = _recorded_run(directory)
    hint = f"maccum generate samples text from a chars run: maccum train --dataset chars --out {directory}"
    if run is not None and run.get("dataset", "chars") != "chars":
        raise ValueError(f"{directory} is a {run['dataset']} run (its latest checkpoint records --dataset "
                         f"{run['dataset']}); {hint}")
    positions = parameters.get("wpe.weight")
    if positions is None or positions.ndim != 2:
        names = ", ".join(sorted(parameters)[:4])
        raise ValueError(f"{directory} is not a chars run (its final.safetensors holds {names}, ..., not the "
                         f"character transformer's parameters); {hint}")
    # the position table has a row per character of context, in the run's dtype
    task = load_task("chars", dtype=positions.dtype.name, block_size=positions.shape[0])
    try:
        task.model.load_record(parameters)
    except RecordError as error:
        raise ValueError(f"{final} does not fit the chars task's transformer ({error}); {hint}") from None
    return task.model.eval(), task.train


def generate_text(model: Module, vocab: CharDataset, prompt: str, options: GenerateOptions) -> str:
    """``prompt`` and ``options.tokens`` characters drawn after it, one at a time from the model's
    prediction for the next character given the last block of text."""
    if not prompt:
        raise ValueError("--prompt needs at least one character for the model to continue")
    ids = list(vocab.encode(prompt))
    block = model.config.block_size
    generator = manual_seed(options.seed)
    top_k = None if options.top_k is None else min(options.top_k, vocab.vocab_size)
    with no_grad():
        for _ in range(options.tokens):
            context = np.array(ids[-block:], dtype=np.int64)[None, :]
            logits: Tensor = model(context)[0, -1] / options.temperature
            if top_k is not None:
                kth = logits.topk(top_k).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            ids.append(int(multinomial(logits.softmax(), 1, generator=generator).item()))
    return vocab.decode(np.array(ids))


def generate_command(args: argparse.Namespace) -> int:
    options = read_generate_options(args)
    model, vocab = load_chars_run(args.source)
    print(generate_text(model, vocab, args.prompt, options))
    return 0

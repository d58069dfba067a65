"""The character transformer trained three ways, the same steps, data order and initial weights:
its gradient arena in float32, in bfloat16 rounded to nearest, in bfloat16 rounded stochastically.

Each window holds k micro-batches of one 32-character sequence: with k = 448 (half the training
set per optimizer step), ``maccum precision --model chars --micro-batch 1 --k 64,448,896``
measures the window gradient (at the initial weights) of a round-to-nearest bfloat16 arena
4.8e-2 off the exact sum at k = 448 and 2.8e-1 at k = 896, of a stochastically rounded one
3.0e-2 and 4.0e-2, of a float32 one 3.2e-7: at k = 448 rounding to nearest has started to lose
the window's later micro-batches. The question ("Revisiting BFloat16 Training", arXiv
2010.06192: stochastic rounding within 0.1-0.2% of float32) is what that costs the model: the
validation loss after the same steps, and the gradient memory each arena takes.
"""

from __future__ import annotations

import math
import tempfile
import textwrap
import time
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.harness import program
from benchmarks.harness.machine import machine_info
from benchmarks.harness.program import Log
from benchmarks.harness.text_table import text_table
from minitorch_accum import optim
from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.data import DataLoader
from minitorch_accum.train import LearnerBuilder

__all__ = ["ARENAS", "BENCHMARK", "Settings", "main", "measure"]

BENCHMARK = "bf16_arena"
#: (name, arena dtype, rounding), in the order of the table
ARENAS = (("float32", "float32", "nearest"), ("bf16 nearest", "bfloat16", "nearest"),
          ("bf16 stochastic", "bfloat16", "stochastic"))


@dataclass(frozen=True)
class Settings:
    """One comparison: micro-batches of ``micro_batch`` sequences, ``k`` per window, ``epochs`` passes."""

    device: str = "cpu"
    micro_batch: int = 1
    k: int = 448
    epochs: int = 4
    lr: float = 1e-2
    seed: int = 0
    quick: bool = False


def full_settings(device: str = "cpu") -> Settings:
    """Two windows of 448 micro-batches per epoch (the epoch's last 3 dropped), 4 epochs: 8 steps."""
    return Settings(device=device)


def quick_settings(device: str = "cpu") -> Settings:
    """One epoch of windows of 64: 14 steps, where rounding to nearest has lost little yet."""
    return Settings(device=device, k=64, epochs=1, quick=True)


def _run(settings: Settings, dtype: str, rounding: str, directory: Path) -> dict[str, Any]:
    manual_seed(settings.seed)
    task = load_task("chars", dtype="float32")
    learner = (LearnerBuilder(directory).num_epochs(settings.epochs).grads_accumulation(settings.k)
               .fusion("leaf").accum_dtype(dtype).rounding(rounding).seed(settings.seed).drop_last_window(True)
               .progress("none").build(task.model, optim.AdamW(lr=settings.lr)))
    started = time.perf_counter()
    _, history = learner.fit(DataLoader(task.train, settings.micro_batch, shuffle=True, seed=settings.seed),
                             DataLoader(task.valid, 512))
    store = learner.accumulator.store
    return {
        "arena_dtype": dtype,
        "rounding": rounding,
        "gradient_bytes": store.nbytes,
        "gradient_elements": sum(p.size for p in task.model.parameters()),
        "steps": [{"step": r["step"], "loss": r["loss"], "grad_norm": r.get("grad_norm")} for r in history.steps],
        "valid": [{"epoch": r["epoch"], "step": r["step"], "loss": r["loss"], "accuracy": r.get("accuracy")}
                  for r in history.valid],
        "seconds": time.perf_counter() - started,
        "task": task.description,
    }


def measure(settings: Settings, log: Log) -> dict[str, Any]:
    """The three runs; the payload of the result file."""
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, dtype, rounding in ARENAS:
            log(f"{name}: k = {settings.k} micro-batches of {settings.micro_batch}, {settings.epochs} epoch(s)")
            runs[name] = _run(settings, dtype, rounding, Path(scratch) / name.replace(" ", "_"))
            last = runs[name]["valid"][-1]
            log(f"  validation loss {last['loss']:.5f} after step {last['step']}, {runs[name]['seconds']:.0f} s")
    base = runs["float32"]["valid"][-1]["loss"]
    for run in runs.values():
        run["valid_loss_vs_float32"] = run["valid"][-1]["loss"] / base - 1
    return {"benchmark": BENCHMARK, "machine": machine_info(), "settings": asdict(settings), "runs": runs,
            "task": runs["float32"]["task"]}


def format_table(payload: dict[str, Any]) -> str:
    settings = payload["settings"]
    lines = [f"{payload['task']}",
             f"AdamW lr {settings['lr']}, windows of k = {settings['k']} micro-batches of {settings['micro_batch']} "
             f"sequence(s), {settings['epochs']} epoch(s), seed {settings['seed']}"]
    rows = []
    for name, run in payload["runs"].items():
        last = run["valid"][-1]
        rows.append([name, str(len(run["steps"])), f"{run['steps'][-1]['loss']:.4f}", f"{last['loss']:.5f}",
                     f"{run['valid_loss_vs_float32']:+.2%}", f"{last['accuracy']:.4f}",
                     f"{run['gradient_bytes']:,}", f"{run['seconds']:.0f}"])
    lines += text_table(["arena", "steps", "last train loss", "valid loss", "vs float32", "valid acc",
                         "gradient bytes", "s"], rows)
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path) -> None:
    """Training loss per step and validation loss per epoch, one line per arena; the gradient bytes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.6), layout="constrained")
    train, valid, memory = fig.subplots(1, 3, width_ratios=[1.4, 1.4, 0.8])
    colors = {"float32": "tab:blue", "bf16 nearest": "tab:red", "bf16 stochastic": "tab:orange"}
    for name, run in payload["runs"].items():
        train.plot([s["step"] for s in run["steps"]], [s["loss"] for s in run["steps"]], marker="o", markersize=3,
                   color=colors[name], label=name)
        valid.plot([v["step"] for v in run["valid"]], [v["loss"] for v in run["valid"]], marker="s", markersize=4,
                   color=colors[name], label=f"{name}: {run['valid'][-1]['loss']:.4f} "
                   f"({run['valid_loss_vs_float32']:+.2%})")
    settings = payload["settings"]
    train.set(xlabel="optimizer step", ylabel="training loss (window mean)",
              title=f"k = {settings['k']} micro-batches of {settings['micro_batch']} per step")
    valid.set(xlabel="optimizer step", ylabel="validation loss", title="validation loss after each epoch")
    for ax in (train, valid):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    names = list(payload["runs"])
    memory.barh(names, [payload["runs"][n]["gradient_bytes"] / 2**10 for n in names],
                color=[colors[n] for n in names])
    memory.set(xlabel="gradient arena, KiB", title="gradient memory")
    memory.invert_yaxis()
    fig.suptitle(textwrap.fill(payload["task"], 150), fontsize=8)
    fig.savefig(path, dpi=110)


def _apply(settings: Settings, args: Any) -> Settings:
    if args.k is not None:
        settings = replace(settings, k=args.k)
    if args.epochs is not None:
        settings = replace(settings, epochs=args.epochs)
    if settings.k < 1 or settings.epochs < 1 or not math.isfinite(settings.lr):
        raise ValueError("--k and --epochs must be positive")
    return settings


def _arguments(parser: Any) -> None:
    parser.add_argument("--k", type=program.positive_int, default=None, help="micro-batches per window")
    parser.add_argument("--epochs", type=program.positive_int, default=None, help="passes over the training set")


BF16_ARENA = program.Benchmark(
    name=BENCHMARK,
    description="The character transformer with a float32, a bfloat16 round-to-nearest and a bfloat16 "
                "stochastically rounded gradient arena: validation loss after the same steps, gradient memory.",
    quick_help="one epoch of windows of 64",
    full_settings=full_settings, quick_settings=quick_settings,
    measure=measure, format_table=format_table, plot=plot,
    add_arguments=_arguments, apply_arguments=_apply,
)

main = partial(program.main, BF16_ARENA)

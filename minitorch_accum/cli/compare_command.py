"""``maccum compare``: k x b, k*b and b from the same seed, measured side by side.

Writes ``compare.png`` (loss curves against items seen; a bar per run of its measured
activation memory, arrays and other allocations apart, with the 1/k reference),
``compare.md`` (the table printed at the end) and ``compare.json`` (every figure, and each
run's per-step memory as its progress lines showed it).

The memory of a run is the statistic its progress lines show for each optimizer step (the
largest peak of the window's micro-batches, ``train.progress.activation_memory``), taken
over the run's largest windows: those holding the most items (a partial window at the end
of an epoch holds fewer); the median over them, which are equal whenever their micro-batches
have equal shapes.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minitorch_accum.backend import thread_settings
from minitorch_accum.cli.compare_plot import write_compare_plot
from minitorch_accum.cli.training_run import build_run
from minitorch_accum.data import DEFAULT_BLOCK_SIZE
from minitorch_accum.train.progress import activation_memory, format_bytes
from minitorch_accum.train.settings import commanded

__all__ = ["MEMORY_TOLERANCE", "WALL_TIME_TARGET", "compare_command", "compare_runs", "memory_statistic",
           "wall_time_ratio", "write_compare_plot"]

#: the accumulated run's activation arrays should be within this share of 1/k of the big batch's
MEMORY_TOLERANCE = 0.10

#: the settings compare.json records: those of the command's own options
COMPARED_SETTINGS = tuple(row.name for row in commanded("compare") if row.name != "out")

DEFINITIONS = {
    "array_bytes": "activation memory: the largest peak, over a window's micro-batches, of the bytes of arrays "
                   "allocated during one micro-batch's forward + backward and alive together (saved activations "
                   "and temporaries), counted by NumPy's allocator (a CuPy memory hook on a GPU), the arena's own "
                   "writes left out (their scratch depends on the kernel path); the median of that per-step figure "
                   "over the run's largest windows (the most items)",
    "other_bytes": "what tracemalloc counted at the same peak beyond those arrays: Python objects (graph nodes, "
                   "closures, shape tuples) and other host allocations, same steps and statistic",
    "memory_ratio": "array_bytes of k x b / array_bytes of k*b",
    "curve": "(items seen, train loss per item of the window) after each optimizer step",
}


def memory_statistic(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's activation memory from its metrics records: (arrays, other) of each step, as the
    progress lines show them, and their medians over the steps that hold the most items."""
    if not steps:
        raise ValueError("compare: a run made no optimizer step, so it has no memory to compare")
    most = max(r["items"] for r in steps)
    largest = [r for r in steps if r["items"] == most]
    per_step = [activation_memory(r) for r in steps]
    chosen = [activation_memory(r) for r in largest]
    arrays = None if any(a is None for a, _ in chosen) else int(statistics.median(a for a, _ in chosen))
    smaller = [r for r in steps if r["items"] < most]
    return {
        "array_bytes": arrays,
        "other_bytes": int(statistics.median(o for _, o in chosen)),
        "largest_window_items": most,
        "largest_window_steps": [r["step"] for r in largest],
        # the windows left out: a partial window at an epoch's end (its micro-batches, items, arrays)
        "smaller_windows": [(r.get("micro_batches"), r["items"], activation_memory(r)[0]) for r in smaller],
        "per_step_array_bytes": [a for a, _ in per_step],
        "per_step_other_bytes": [o for _, o in per_step],
    }


def compare_runs(values: Mapping[str, Any], out: Path) -> list[dict[str, Any]]:
    """Train ``k x b``, ``k*b`` and ``b`` from the same seed and data order; one dict per run
    (``values``: the settings table's values by row name)."""
    b, k = values["micro_batch"], values["grads_accumulation"]
    runs = [("accumulated", b, k), ("one big batch", k * b, 1), ("no accumulation", b, 1)]
    results = []
    rows: int | None = None  # the training set's, known once the first run is built
    for kind, micro, accum in runs:
        if kind == "one big batch" and rows is not None and micro > rows:
            # the window then holds the whole epoch, and so does the batch it is compared with
            print(f"(k x b = {k} x {b} = {micro:,} rows is more than the {rows:,} of the training set: the big batch "
                  "is all of them, as the window is)")
            micro = rows
        slug = f"b{micro}_k{accum}"
        print(f"--- {kind}: micro-batch {micro}, k={accum}")
        # the data and the model are built before the clock starts: the first run would otherwise pay
        # alone for loading the data set and importing what training needs
        learner, train, valid = build_run({**values, "out": out / slug, "micro_batch": micro,
                                           "grads_accumulation": accum})
        rows = len(train.dataset)
        learner.resume_hint = "maccum compare has no resume: it starts its three runs afresh, so run it again"
        start, cpu_start = time.perf_counter(), time.process_time()
        _, history = learner.fit(train, valid, resume=values["resume"], overwrite=True)  # compare re-runs
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        items, curve = 0, []
        for record in history.steps:
            items += record["items"]
            curve.append((items, record["loss"]))
        k_used = max((r["micro_batches"] for r in history.steps), default=0)
        name = f"{k_used} x {micro}" if kind == "accumulated" else f"{micro}"
        last_valid = history.valid[-1] if history.valid else {}
        results.append({
            "label": f"{name} ({kind})", "name": name, "kind": kind, "micro_batch": micro, "k": accum,
            "k_used": k_used, "steps": len(history.steps), "items": items,
            "micro_batches": sum(r["micro_batches"] for r in history.steps),
            "final_loss": history.final_loss, "valid_loss": last_valid.get("loss"),
            "valid_accuracy": last_valid.get("accuracy"),
            **memory_statistic(history.steps),
            "seconds": seconds, "cpu_seconds": cpu_seconds, "curve": curve,
        })
    return results


def _ratio(results: list[dict[str, Any]]) -> float | None:
    acc, big = results[0], results[1]
    if acc["array_bytes"] is None or not big["array_bytes"]:
        return None
    return acc["array_bytes"] / big["array_bytes"]


def markdown_table(results: list[dict[str, Any]]) -> str:
    big = results[1]["array_bytes"]
    lines = ["| run | micro-batch | k used | optimizer steps | final train loss | valid loss | valid accuracy "
             "| activation arrays | other (Python objects) | arrays / one big batch | wall time |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        accuracy = "-" if r["valid_accuracy"] is None else f"{r['valid_accuracy']:.3f}"
        valid = "-" if r["valid_loss"] is None else f"{r['valid_loss']:.4f}"
        arrays = "-" if r["array_bytes"] is None else format_bytes(r["array_bytes"])
        ratio = "-" if r["array_bytes"] is None or not big else f"{r['array_bytes'] / big:.3f}"
        lines.append(f"| {r['label']} | {r['micro_batch']} | {r['k_used']} | {r['steps']} | {r['final_loss']:.4f} | "
                     f"{valid} | {accuracy} | {arrays} | {format_bytes(r['other_bytes'])} | {ratio} | "
                     f"{_seconds(r['seconds'])} |")
    return "\n".join(lines)


def _fixed_and_per_item(results: list[dict[str, Any]]) -> tuple[float, float] | None:
    """Arrays = fixed + per_item x items through the two measurements of k x b and k*b (a
    straight line through two measured points, to say where a ratio above 1/k comes from)."""
    acc, big = results[0], results[1]
    small_items = acc["largest_window_items"] / max(1, acc["k_used"])
    big_items = big["largest_window_items"]
    if acc["array_bytes"] is None or big["array_bytes"] is None or big_items <= small_items:
        return None
    per_item = (big["array_bytes"] - acc["array_bytes"]) / (big_items - small_items)
    return acc["array_bytes"] - per_item * small_items, per_item


def _partial_window_note(run: dict[str, Any]) -> str | None:
    """Why a run's figure leaves its partial windows out, and what theirs is."""
    smaller = run.get("smaller_windows") or []
    if not smaller or run["array_bytes"] is None:
        return None
    micro, items, arrays = smaller[-1]
    same = arrays == run["array_bytes"]
    figure = "-" if arrays is None else format_bytes(arrays)
    why = ("the same, since a micro-batch's activations do not depend on how many micro-batches its window holds"
           if same else "its largest micro-batch is a short one, the epoch's last")
    return (f"(the figure is the median over the {len(run['largest_window_steps'])} fullest windows of "
            f"{run['name']}; {len(smaller)} partial window(s) at an epoch's end, the last of {micro} micro-batches "
            f"and {items:,} items, show {figure}: {why})")


#: the overhead accumulation may cost in wall time: k x b within this factor of one batch of k*b
WALL_TIME_TARGET = 1.15


def wall_time_ratio(results: list[dict[str, Any]]) -> float | None:
    """Wall time of the accumulated run over that of one big batch (None when that one took no time)."""
    acc, big = results[0], results[1]
    return acc["seconds"] / big["seconds"] if big["seconds"] > 0 else None


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"


def _per_micro_batch_cost(results: list[dict[str, Any]]) -> float | None:
    """Seconds the accumulated run spent per micro-batch beyond the big batch's (the fixed cost
    of one more forward + backward), or None when the runs hold as many micro-batches."""
    acc, big = results[0], results[1]
    extra = acc.get("micro_batches", 0) - big.get("micro_batches", 0)
    return (acc["seconds"] - big["seconds"]) / extra if extra > 0 else None


def summary(results: list[dict[str, Any]], k: int, dtype: str = "float32") -> list[str]:
    """The printed verdict: the wall-time ratio, the memory ratio against 1/k, and whether the curves agree."""
    acc, big = results[0], results[1]
    lines = []
    wall = wall_time_ratio(results)
    if wall is not None:
        cpu = (f"; CPU time {acc['cpu_seconds']:.1f} s against {big['cpu_seconds']:.1f} s, "
               f"{acc['cpu_seconds'] / big['cpu_seconds']:.2f}x" if big.get("cpu_seconds") else "")
        lines.append(f"wall time: {acc['name']} took {_seconds(acc['seconds'])}, {big['name']} "
                     f"{_seconds(big['seconds'])}: "
                     f"{wall:.2f}x ({'within' if wall <= WALL_TIME_TARGET else 'NOT within'} the "
                     f"{WALL_TIME_TARGET:.2f}x of a small overhead; each run's training loop, its data and model "
                     "built before the clock started; threads: "
                     f"{thread_settings().requested or 'as the libraries chose'}{cpu})")
        per_call = _per_micro_batch_cost(results)
        if wall > WALL_TIME_TARGET and per_call is not None:
            lines.append(f"why: {acc['name']} runs {acc['micro_batches']} micro-batches where {big['name']} runs "
                         f"{big['micro_batches']}; the extra time over the extra micro-batches is "
                         f"{per_call * 1e3:.2f} ms each, a fixed cost per forward + backward (Python, graph "
                         "building, kernel launches) that a model this small does not hide behind its arithmetic")
    ratio = _ratio(results)
    if ratio is None:
        lines.append("activation arrays could not be told apart from Python objects here (this NumPy has no "
                     "data-memory handler): no memory ratio")
    else:
        k_used = acc["k_used"]
        low, high = (1 - MEMORY_TOLERANCE) / k_used, (1 + MEMORY_TOLERANCE) / k_used
        within = low <= ratio <= high
        lines.append(f"{acc['name']} used {ratio:.3f} of the activation arrays of {big['name']} "
                     f"({format_bytes(acc['array_bytes'])} against {format_bytes(big['array_bytes'])}); "
                     f"1/{k_used} = {1 / k_used:.3f}: {'within' if within else 'NOT within'} "
                     f"{MEMORY_TOLERANCE:.0%} of 1/k ({low:.3f} to {high:.3f})")
        if k_used != k:
            lines.append(f"(k={k} was asked for, but an epoch holds only {k_used} micro-batches per window)")
        partial = _partial_window_note(acc)
        if partial:
            lines.append(partial)
        line = _fixed_and_per_item(results)
        if line is not None and not within:
            fixed, per_item = line
            lines.append(f"why: a micro-batch's arrays = {format_bytes(fixed)} that do not shrink with the micro-batch "
                         f"+ {format_bytes(per_item)} per item (the line through both measurements); the fixed part "
                         "is parameter-sized temporaries such as bias and embedding gradients, so the ratio "
                         "reaches 1/k only when activations dominate")
        lines.append(f"other allocations (Python objects of the graph, not arrays): "
                     f"{format_bytes(acc['other_bytes'])} for {acc['name']}, {format_bytes(big['other_bytes'])} for "
                     f"{big['name']}: about the same whatever the micro-batch, which is why they are shown apart")
    gaps = [abs(a[1] - b[1]) for a, b in zip(acc["curve"], big["curve"], strict=False)]
    same_items = [a[0] for a in acc["curve"]] == [b[0] for b in big["curve"]]
    if gaps and same_items:
        lines.append(f"loss curves: {acc['name']} and {big['name']} take the same {len(gaps)} optimizer steps over the "
                     f"same items; largest gap between their losses {max(gaps):.2e} (final {acc['final_loss']:.6f} "
                     f"vs {big['final_loss']:.6f}): the same training, up to {dtype} rounding")
        if dtype == "float32":
            lines.append("(the window adds its micro-batches in another order than the big batch sums its items, and "
                         "each optimizer step carries those rounding differences on; rerun with --dtype float64 to see "
                         "the gap fall to float64's rounding)")
    else:
        lines.append(f"loss curves: {acc['name']} took {acc['steps']} steps and {big['name']} {big['steps']}: the "
                     "windows differ, so the curves are not step for step the same")
    return lines


def compare_command(values: Mapping[str, Any]) -> int:
    out = Path(values["out"])
    out.mkdir(parents=True, exist_ok=True)
    results = compare_runs(values, out)
    table = markdown_table(results)
    verdict = summary(results, values["grads_accumulation"], values["dtype"])
    (out / "compare.md").write_text(table + "\n\n" + "\n".join(verdict) + "\n", encoding="utf-8")
    settings = {name: values[name] for name in COMPARED_SETTINGS}
    (out / "compare.json").write_text(json.dumps({
        "settings": settings, "definitions": DEFINITIONS, "memory_ratio": _ratio(results),
        "wall_time_ratio": wall_time_ratio(results), "threads": thread_settings().summary(),
        "memory_tolerance": MEMORY_TOLERANCE, "runs": results}, indent=1) + "\n", encoding="utf-8")
    acc = results[0]
    block = values["block_size"]
    title = f"{values['dataset']}: {acc['name']} against {results[1]['name']} and {results[2]['name']}"
    if values["dataset"] == "chars":
        title += f" (a context of {block or DEFAULT_BLOCK_SIZE} characters)"
    write_compare_plot(results, out / "compare.png", title, MEMORY_TOLERANCE)
    print()
    print(table)
    print()
    for line in verdict:
        print(line)
    print(f"wrote {out / 'compare.png'}, {out / 'compare.md'} and {out / 'compare.json'}")
    return 0

"""``maccum explain``: one window, step by step, and the proof that it equals the big batch.

For each micro-batch: its items, its loss and the peak memory its forward and
backward needed; for each parameter: the kernel that wrote its gradient and the
bytes it moved; then the normalization, the optimizer's fused step, which folds it into
its update (no pass divides the arena), and the window gradient compared with the
gradient of one batch holding the same items. Under ``mpiexec -n R`` each rank takes
its share of a window of R*k micro-batches, and the window's reduction over the ranks
(its buckets, bytes and time) is shown too. Last, what this process computes with (its numerics
fingerprint), whether the ranks compute alike, and what bit-for-bit equality needs.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator
from minitorch_accum.accum.normalization import micro_batch_loss_reduction
from minitorch_accum.autodiff import tensor
from minitorch_accum.backend import manual_seed
from minitorch_accum.backend.numerics import numerics_fingerprint
from minitorch_accum.cli.explain_verdict import check_window, numerics_lines, verdict_lines
from minitorch_accum.cli.explain_views import wanted, write_window_views
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.cli.training_run import make_optimizer
from minitorch_accum.data import DataLoader
from minitorch_accum.distributed import Communicator, DataParallel, rank_windows
from minitorch_accum.distributed.launch import make_communicator
from minitorch_accum.distributed.rank_agreement import compare_rank_numerics
from minitorch_accum.nn import functional as F
from minitorch_accum.observe.trace_events import OPTIMIZER_STEPS

__all__ = ["explain_command", "explain_window"]


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def explain_window(dataset: str, k: int, micro_batch: int, reduction: str, fusion: str, dtype: str,
                   seed: int = 0, communicator: Communicator | None = None,
                   block_size: int | None = None, model_name: str = "task", optimizer: str = "adamw",
                   lr: float = 3e-3, replay: bool = True) -> dict[str, Any]:
    """Run one window and its optimizer step and return what happened (also used by the tests);
    ``replay``: each micro-batch's forward captured and replayed as training does
    (``Accumulator.capture``)."""
    if k <= 0:
        raise ValueError(f"--accum (k) must be positive, got {k}")
    comm = communicator if communicator is not None else make_communicator("auto")
    manual_seed(seed)
    task = load_task(dataset, dtype=dtype, block_size=block_size, model=model_name)
    model = task.model
    loader = DataLoader(task.train, micro_batch, shuffle=True, seed=seed)
    window = rank_windows(len(loader), k, comm.world_size, comm.rank)[0]
    reducer = DataParallel(comm) if comm.world_size > 1 else None
    acc = Accumulator(model, steps=k, reduction=reduction, fusion=fusion,
                      accum_dtype="float64" if dtype == "float64" else "float32", trace=True, reducer=reducer)
    loss_reduction = micro_batch_loss_reduction(reduction)
    step = acc.capture(lambda x, y: F.cross_entropy(model(x), y, reduction=loss_reduction), enabled=replay)
    micro = []
    for index in window.batches:
        x, y = loader.batch(0, index)
        with acc.micro_batch() as probe:
            loss = step(tensor(x, dtype=dtype) if x.dtype.kind == "f" else x, y)
            items = F.count_items(y)
            acc.backward(loss, num_items=items)
        assert step.last is not None
        micro.append({"index": index, "rows": len(y), "items": items, "loss": float(loss.item()),
                      "array_bytes": acc.activation_peaks[-1], "other_bytes": probe.other_bytes,
                      "replay": step.last.outcome, "replay_reason": step.last.reason})
    scale = acc.window_scale()  # with several ranks, the window is summed over them here
    # what the optimizer reads: the arena's raw sums and the one scale its fused step folds in; the
    # normalized gradient is made here, apart, for the check alone (training never makes it)
    window_grads = acc.gradient_window()
    grads = {name: np.asarray(window_grads.get(p), dtype=np.float64) * window_grads.grad_scale
             for name, p in model.named_parameters() if window_grads.get(p) is not None}
    # the window's items as one batch (every rank's); fetched as one batch, sequences are padded
    # to one width, which the loss ignores
    x_all, y_all = task.train.get_batch(loader.order(0)[window.first * micro_batch:window.stop * micro_batch])
    check = check_window(model, [loader.batch(0, i) for i in range(window.first, window.stop)], grads, x_all, y_all,
                         reduction, fusion, dtype, nominal=k * comm.world_size)
    total_items = check.items
    # the step as training takes it, once the check has used the parameters it started from
    step = make_optimizer(optimizer, lr)
    step.step(model, acc)
    collective = None
    if reducer is not None:
        collective = {"describe": reducer.describe(acc.store), "bytes": reducer.last.bytes,
                      "seconds": reducer.last.seconds, "buckets": len(reducer.last.buckets)}
    numerics = numerics_fingerprint()
    products = {p.data.dtype for p in model.parameters()}  # the dtypes its products round in
    return {"micro": micro, "trace": acc.trace, "scale": scale, "items": total_items,
            "numerics": numerics.describe(), "rank_numerics": compare_rank_numerics(comm, numerics, products=products),
            "used": window.stop - window.first, "differences": check.differences, "task": task.description,
            "rank": comm.rank, "world_size": comm.world_size, "collective": collective, "check": check,
            "micro_batches": len(loader), "optimizer": type(step).__name__}


#: how a micro-batch's forward and backward ran, by the outcome of its replay (autodiff.Replay)
_RAN = {"captured": "ran eagerly and was captured (its ops recorded)",
        "checked": "ran eagerly, captured again and found the same: the next ones replay it",
        "replayed": "replayed: the captured ops over its arrays, without the model's Python",
        "eager": "ran eagerly"}


def _ran(micro: Mapping[str, Any]) -> str:
    reason = micro["replay_reason"]
    return _RAN[micro["replay"]] + ("" if reason is None else f" ({reason})")


def _print_events(events: list[Any]) -> None:
    for e in events:
        print(f"    {e.param:<22} {e.kernel:<24} {e.elements:>8} elements  {e.bytes:>9} bytes  "
              f"{e.seconds * 1e6:8.1f} us")


def _step_line(optimizer: str, launches: list[Any]) -> str:
    """The optimizer's step as the trace recorded it: its fused kernel, the scale it folded in, what it moved."""
    if not launches:
        return f"optimizer step ({optimizer}): skipped (a gradient of the window was not finite)"
    kernels = ", ".join(dict.fromkeys(f"{e.kernel} ({e.path})" for e in launches))
    scales = ", ".join(dict.fromkeys(f"{e.scale:.6g}" for e in launches if e.scale is not None))
    elements, moved = sum(e.elements for e in launches), sum(e.bytes for e in launches)
    count = f"{len(launches)} launch{'es' if len(launches) > 1 else ''}"
    return textwrap.fill(
        f"optimizer step ({optimizer}): the fused kernel {kernels} read the window's raw sums in the arena ({count} "
        f"over {elements:,} elements) and multiplied them by the scale {scales} as it updated the parameters: "
        f"{moved:,} bytes, {sum(e.seconds for e in launches) * 1e6:.1f} us; the normalization cost no pass of its own",
        110, subsequent_indent="    ")


def explain_command(values: Mapping[str, Any]) -> int:
    """Print one window of the settings ``values`` (the table's, by row name)."""
    dataset, k, b = values["dataset"], values["grads_accumulation"], values["micro_batch"]
    reduction, fusion, dtype = values["reduction"], values["fusion"], values["dtype"]
    report = explain_window(dataset, k, b, reduction, fusion, dtype, values["seed"], block_size=values["block_size"],
                            model_name=values["model"], optimizer=values["optimizer"], lr=values["lr"],
                            replay=values["replay"])
    # every rank records its share (--trace-out, --figure); rank 0 says where the files went
    views = write_window_views(values, make_communicator("auto")) if wanted(values) else []
    if report["rank"] != 0:
        return 0  # rank 0 tells the story
    ranks = report["world_size"]
    share = f" on each of {ranks} ranks (window of {report['used']})" if ranks > 1 else ""
    rows = "items" if dataset == "digits" else "rows"  # a row of sequences or chars holds several items
    ran = report["used"] if ranks == 1 else k
    print(f"One window of k={ran} micro-batches of {b} {rows}{share}: {report['task']}")
    if report["used"] < k * ranks:
        print(f"(--accum {k} asked for more micro-batches than the training set holds: {report['micro_batches']} "
              f"micro-batches of {b} {rows}, so the window is all of them; a short window is normalized by what it "
              "holds)")
    trace = report["trace"]
    print(f"reduction={reduction}, fusion={fusion}, dtype={dtype}")
    print(f"kernels ran on: {trace.paths_line()}\n")
    for position, m in enumerate(report["micro"]):
        other = "" if m["other_bytes"] is None else f" (+{_kib(m['other_bytes'])} of Python objects)"
        print(f"micro-batch {m['index']}: {m['items']} items, loss {m['loss']:.4f}, "
              f"activation arrays at the peak {_kib(m['array_bytes'])}{other}; {_ran(m)}")
        _print_events([e for e in trace.events if e.micro_batch == position and e.window == 0])
    print()
    if report["collective"] is not None:
        c = report["collective"]
        print(f"reduction over the ranks: {c['describe']}; {c['bytes']:,} bytes in {c['buckets']} bucket call(s), "
              f"{c['seconds'] * 1e3:.2f} ms")
        _print_events([e for e in trace.events if e.kernel == "allreduce"])
    else:
        print("one process: nothing to reduce (under mpiexec -n R the window is summed over the ranks once, here)")
    rule = {"items": f"divide the summed gradient by the window's {report['items']} items",
            "mean": f"divide by the {report['used']} micro-batches accumulated",
            "mean_nominal": f"divide by the configured k = {k}, whatever the window holds",
            "sum": "no division"}[reduction]
    print(f"normalization ({reduction}): {rule} -> scale {report['scale']:.6g}, folded into the optimizer's step "
          "(below): no pass over the arena divides it")
    _print_events([e for e in trace.events if e.micro_batch < 0 and e.kernel not in ("allreduce", *OPTIMIZER_STEPS)])
    print(_step_line(report["optimizer"], [e for e in trace.events if e.kernel in OPTIMIZER_STEPS]))
    print(f"\ncheck against one batch of the same {report['items']} items (summed loss / items); the window's "
          f"gradient is its raw sums times {report['scale']:.6g}, made apart for this check:")
    for name, diff in report["differences"].items():
        print(f"    {name:<18} max |window - big batch| = {diff:.3e}")
    for line in verdict_lines(report["check"]):
        indent = " " * (len(line) - len(line.lstrip()) + (3 if line.lstrip()[:1].isdigit() else 0))
        print(textwrap.fill(line, 110, subsequent_indent=indent or "    "))
    for line in numerics_lines(report["numerics"], report["rank_numerics"]):
        print(textwrap.fill(line, 110, subsequent_indent="    "))
    if views:
        print("\n" + "\n".join(views))
    return 0

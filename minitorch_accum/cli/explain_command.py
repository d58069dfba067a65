"""``maccum explain``: one window, step by step, and the proof that it equals the big batch.

For each micro-batch: its items, its loss and the peak memory its forward and
backward needed; for each parameter: the kernel that wrote its gradient and the
bytes it moved; then the normalization, and the window gradient compared with the
gradient of one batch holding the same items.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from minitorch_accum.accum import Accumulator, window_scale
from minitorch_accum.autodiff import tensor
from minitorch_accum.backend import manual_seed
from minitorch_accum.cli.tasks import load_task
from minitorch_accum.data import DataLoader
from minitorch_accum.nn import functional as F

__all__ = ["explain_command", "explain_window"]


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def explain_window(dataset: str, k: int, micro_batch: int, reduction: str, fusion: str, dtype: str,
                   seed: int = 0) -> dict[str, Any]:
    """Run one window and return what happened (also used by the tests)."""
    if k <= 0:
        raise ValueError(f"--accum (k) must be positive, got {k}")
    manual_seed(seed)
    task = load_task(dataset, dtype=dtype)
    model = task.model
    loader = DataLoader(task.train, micro_batch, shuffle=True, seed=seed)
    batches = [b for _, b in zip(range(k), loader.batches(0), strict=False)]
    acc = Accumulator(model, steps=k, reduction=reduction, fusion=fusion,
                      accum_dtype="float64" if dtype == "float64" else "float32", trace=True)
    micro = []
    for i, (x, y) in enumerate(batches):
        with acc.micro_batch():
            logits = model(tensor(x, dtype=dtype) if x.dtype.kind == "f" else x)
            loss = F.cross_entropy(logits, y, reduction="mean" if reduction == "mean" else "sum")
            items = F.count_items(y)
            acc.backward(loss, num_items=items)
        micro.append({"index": i, "items": items, "loss": float(loss.item()), "peak_bytes": acc.activation_peaks[-1]})
    used = len(batches)
    scale = window_scale(reduction, used, acc.items_seen)
    grads = {name: np.array(acc.grads()[p], dtype=np.float64)
             for name, p in model.named_parameters() if p in acc.grads()}
    # the same items as one batch, normalized the exact way (sum over items / items)
    # (fetched as one batch, so sequences are padded to one width; padding is ignored by the loss)
    x_all, y_all = task.train.get_batch(loader.order(0)[: sum(len(b[1]) for b in batches)])
    big = F.cross_entropy(model(tensor(x_all, dtype=dtype) if x_all.dtype.kind == "f" else x_all), y_all,
                          reduction="sum")
    big_grads = big.backward()
    total_items = F.count_items(y_all)
    differences = {name: float(np.max(np.abs(grads[name] - np.asarray(big_grads[p], np.float64) / total_items)))
                   for name, p in model.named_parameters() if name in grads}
    return {"micro": micro, "trace": acc.trace, "scale": scale, "items": acc.items_seen, "used": used,
            "differences": differences, "task": task.description}


def explain_command(args: Any) -> int:
    report = explain_window(args.dataset, args.accum, args.micro_batch, args.reduction, args.fusion, args.dtype,
                            args.seed)
    print(f"One window of k={args.accum} micro-batches of {args.micro_batch} items: {report['task']}")
    print(f"reduction={args.reduction}, fusion={args.fusion}, dtype={args.dtype}\n")
    trace = report["trace"]
    for m in report["micro"]:
        print(f"micro-batch {m['index']}: {m['items']} items, loss {m['loss']:.4f}, "
              f"peak activation memory {_kib(m['peak_bytes'])}")
        for e in trace.events:
            if e.micro_batch == m["index"] and e.window == 0:
                print(f"    {e.param:<18} {e.kernel:<24} {e.elements:>8} elements  {e.bytes:>9} bytes  "
                      f"{e.seconds * 1e6:8.1f} us")
    print()
    rule = {"items": f"divide the summed gradient by the window's {report['items']} items",
            "mean": f"divide by the {report['used']} micro-batches accumulated",
            "sum": "no division"}[args.reduction]
    print(f"normalization ({args.reduction}): {rule} -> scale {report['scale']:.6g}")
    for e in trace.events:
        if e.micro_batch < 0:
            print(f"    {e.param:<18} {e.kernel:<24} {e.elements:>8} elements  {e.bytes:>9} bytes")
    worst = max(report["differences"].values())
    tolerance = 1e-12 if args.dtype == "float64" else 1e-5
    print(f"\ncheck against one batch of the same {report['items']} items (summed loss / items):")
    for name, diff in report["differences"].items():
        print(f"    {name:<18} max |window - big batch| = {diff:.3e}")
    if args.reduction == "items":
        verdict = "equal" if worst <= tolerance else "NOT equal"
        print(f"window gradient and big-batch gradient are {verdict} (tolerance {tolerance:g} for {args.dtype}; "
              "only the summation order differs)")
    else:
        print(f"reduction={args.reduction} is not the per-item mean of the window when micro-batches hold "
              "different numbers of items; the difference above is the price of that")
    return 0

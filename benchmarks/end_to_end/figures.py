"""The end-to-end figures of one window length k, from the timed samples and phases, and
what each figure means (written into the result file as ``definitions``)."""

from __future__ import annotations

from typing import Any

from benchmarks.end_to_end.windows import Phases
from benchmarks.harness.contention import MIN_QUIET_ROUNDS, QUIET_SHARE
from benchmarks.harness.timing import median

__all__ = ["DEFINITIONS", "window_figures"]

DEFINITIONS = {
    "micro_step_seconds": "median over interleaved rounds of (k micro-batches through the Accumulator, forward + "
                          "acc.backward, plus the window close acc.found_nonfinite()) / k",
    "plain_micro_step_seconds": "median of (k forwards + loss.backward() returning a Gradients container that is "
                                "dropped: no accumulation) / k",
    "overhead_share": "(micro_step_seconds - plain_micro_step_seconds) / micro_step_seconds; negative when the "
                      "accumulating path is faster than a plain backward",
    "overhead_share_paired": "median over rounds of the same ratio taken within each round",
    "direct_share": "(seconds in accumulation kernels per micro-batch, from Accumulator(trace=True): every kernel "
                    "but the fused GEMMs, plus the beta=1 GEMMs' time over beta=0 GEMMs of the same parameter) / "
                    "micro_step_seconds",
    "items_per_second": "k*b items (a transformer's: k*b*block target characters) / median seconds of a whole "
                        "window: k micro-batches, window close, optimizer step (SGD momentum), acc.zero()",
    "torch": "PyTorch eager, same init (the transformer's head tied to its token embedding there too), loss = "
             "cross_entropy(reduction='sum') / (the window's items) per micro-batch, .backward() accumulating into "
             ".grad, SGD(momentum).step() and zero_grad() per window",
    "timing_basis": "medians are taken over the rounds in which other processes used at most "
                    f"{QUIET_SHARE:.0%} of all cores, when there are at least {MIN_QUIET_ROUNDS} such rounds, and "
                    "over every round otherwise; 'all_rounds' holds the main figures over every round",
    "memory_ratio": "max peak of array bytes of the k micro-batches of a window / peak array bytes of one batch of "
                    "k*b, each counted by the allocator (NumPy's, through a data-memory handler, on the CPU; a CuPy "
                    "memory hook on a GPU) around forward + backward through Accumulator.micro_batch(); "
                    "total_ratio: the same with tracemalloc's total, which adds the Python objects of the graph",
}


def window_figures(k: int, items: int, samples: dict[str, list[float]], phases: dict[str, Phases],
                   traces: dict[str, dict[str, Any]], fusions: tuple[str, ...], has_torch: bool,
                   rounds: list[int]) -> dict[str, Any]:
    """Every timing figure of window length ``k``, from the medians over ``rounds``.

    ``items``: what one micro-batch holds (b rows x items per row). Variants are keyed
    ``"<k>/plain"``, ``"<k>/<fusion>"`` and ``"<k>/torch"``."""

    def med(values: list[float]) -> float:
        return median([values[i] for i in rounds])

    plain = samples[f"{k}/plain"]
    plain_micro = med(plain) / k
    row: dict[str, Any] = {"plain": {"micro_step_seconds": plain_micro}, "fusions": {}, "torch": None}
    torch_ips = None
    if has_torch:
        ph = phases[f"{k}/torch"]
        torch_ips = k * items / med(samples[f"{k}/torch"])
        row["torch"] = {"window_seconds": med(samples[f"{k}/torch"]), "micro_step_seconds": med(ph.accumulate) / k,
                        "update_seconds": med(ph.update), "items_per_second": torch_ips}
    for fusion in fusions:
        ph = phases[f"{k}/{fusion}"]
        total = samples[f"{k}/{fusion}"]
        micro_step = med(ph.accumulate) / k
        paired = [(ph.accumulate[i] - plain[i]) / ph.accumulate[i] for i in rounds]
        trace = traces[fusion][str(k)]
        # a beta = 1 GEMM cannot be cheaper than beta = 0 in principle (OpenBLAS even zeroes
        # C in a pass of its own for beta = 0): a negative difference counts as zero
        direct_seconds = trace["accumulation_seconds_per_micro_batch"] + max(0.0, trace["gemm_beta1_extra_seconds"])
        ips = k * items / med(total)
        row["fusions"][fusion] = {
            "micro_step_seconds": micro_step,
            "window_seconds": med(total),
            "update_seconds": med(ph.update),
            "items_per_second": ips,
            "overhead_seconds_per_micro_batch": micro_step - plain_micro,
            "overhead_share": (micro_step - plain_micro) / micro_step,
            "overhead_share_paired": median(paired),
            "direct_seconds_per_micro_batch": direct_seconds,
            "direct_share": direct_seconds / micro_step,
            "vs_torch": ips / torch_ips if torch_ips else None,
            "trace": trace,
        }
    return row

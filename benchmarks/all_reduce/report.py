"""The all-reduce benchmark's table and plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.harness.machine import machine_line, threads_line

__all__ = ["format_table", "plot"]


def _network_lines(payload: dict[str, Any]) -> list[str]:
    network = payload.get("network") or {"hosts": 1}
    if network["hosts"] == 1:
        return []
    return [f"over {network['hosts']} hosts ({', '.join(network['host_names'])}, {network['ranks_per_host']} rank(s) "
            f"each), MPICH's {network['netmod']} netmod on {', '.join(network['transports']) or '?'}; "
            f"the link: {network['link']}", ""]


def _bucket_lines(record: dict[str, Any] | None, title: str) -> list[str]:
    if not record:
        return []
    cells = [f"#{b['index']} {b['nbytes'] / 2**10:.0f} KiB {b['seconds'] * 1e3:.2f} ms"
             + (" (started in backward)" if b["during_backward"] else "") for b in record["buckets"]]
    return [f"{title}: {len(cells)} bucket(s), {record['bytes'] / 2**20:.2f} MiB in "
            f"{record['seconds'] * 1e3:.2f} ms (facts {record['facts_seconds'] * 1e3:.2f} ms): " + "; ".join(cells)]


def format_table(payload: dict[str, Any]) -> str:
    settings, step = payload["settings"], payload["step"]
    lines = [machine_line(payload.get("machine", {})),
             threads_line(payload.get("machine", {})) + " (this process; each rank: MTA_NUM_THREADS)",
             f"all-reduce of a float32 gradient arena over {settings['ranks']} ranks (MPI), against a copy of "
             "the same bytes on one rank; times are the slowest rank's medians", "", *_network_lines(payload),
             f"{'elements':>10}  {'MiB':>7}  {'copy GB/s':>9}  {'allreduce GB/s':>14}  {'allreduce / copy time':>21}"]
    for a in payload["arenas"]:
        lines.append(f"{a['elements']:>10}  {a['bytes'] / 2**20:>7.2f}  {a['copy_gbps']:>9.2f}  "
                     f"{a['allreduce_gbps']:>14.2f}  {a['allreduce_over_copy_time']:>21.1f}")
    lines += ["", f"optimizer step, one global batch of {step['items_per_step']} items (MLP {settings['dims']}): "
              f"1 rank x k={step['k_single']}: {step['single_seconds'] * 1e3:.1f} ms; "
              f"{settings['ranks']} ranks x k={step['k_per_rank']}: {step['ranks_seconds'] * 1e3:.1f} ms "
              f"(speed-up {step['speedup']:.2f}x with {settings['threads_per_rank']} thread(s) per rank)",
              f"the same with each bucket's reduction started during the last backward (overlap): "
              f"{step['overlap_seconds'] * 1e3:.1f} ms ({step['overlap_over_plain']:.2f}x the time without)"]
    lines += _bucket_lines(step.get("window_reduction"), "the last window's reduction on rank 0")
    lines += _bucket_lines(step.get("overlap_window_reduction"), "with overlap")
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arenas = payload["arenas"]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    sizes = [a["bytes"] / 2**20 for a in arenas]
    ax.plot(sizes, [a["copy_gbps"] for a in arenas], "o-", label="memory copy (one rank)")
    ax.plot(sizes, [a["allreduce_gbps"] for a in arenas], "s-", label=f"all-reduce ({payload['settings']['ranks']} "
            "ranks, MPI)")
    ax.set_xscale("log")
    ax.set_xlabel("arena size (MiB)")
    ax.set_ylabel("GB/s (arena bytes / time)")
    ax.set_title("the window's one reduction against the memory-copy limit")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""The op-level benchmark's printed table: medians and ratios ours / PyTorch per case."""

from __future__ import annotations

from typing import Any

from benchmarks.harness.machine import machine_line
from benchmarks.harness.text_table import text_table

__all__ = ["format_table"]


def _ms(case: dict[str, Any], name: str) -> str:
    value = case["median_ms"].get(name)
    return "-" if value is None else f"{value:.3f}"


def _x(case: dict[str, Any], name: str) -> str:
    value = case["ratios"].get(name)
    return "-" if value is None else f"{value:.2f}"


def format_table(payload: dict[str, Any]) -> str:
    settings = payload["settings"]
    load = payload["load_average"]
    lines = [machine_line(payload.get("machine", {})),
             f"layer ops, float32, {settings['threads']} thread(s) for BLAS, PyTorch and the native pool; "
             f"load average before {load['before']}, after {load['after']}", ""]
    rows = []
    for c in [c for c in payload["cases"] if c["case"] != "weight-gradient GEMM"]:
        met = "" if "target" not in c else ("met" if c["target"]["met"] else "missed")
        rows.append([c["case"], c["shape"], _ms(c, "ours_forward"), _ms(c, "torch_forward"), _ms(c, "ours_backward"),
                     _ms(c, "torch_backward"), _x(c, "forward"), _x(c, "backward"), _x(c, "both"),
                     _x(c, "forward_vs_numpy"), _x(c, "backward_vs_numpy"), met])
    lines += text_table(["op", "shape", "ours fwd ms", "torch fwd", "ours bwd", "torch bwd", "fwd x", "bwd x",
                         "both x", "fwd / numpy", "bwd / numpy", "<= 1.2x"], rows, numbers_right=True, rule=True)
    gemms = [[c["shape"], _ms(c, "ours_gemm"), _ms(c, "ours_k256"), _ms(c, "torch_addmm"), _x(c, "gemm"),
              _x(c, "gemm_k256"), _x(c, "k256_over_backend")]
             for c in payload["cases"] if c["case"] == "weight-gradient GEMM"]
    if gemms:
        lines += ["", "weight-gradient GEMM out += a^T g (beta = 1), ms, and over PyTorch (MKL):"]
        lines += text_table(["shape", "backend", "K-blocks of 256", "torch addmm_", "backend x", "blocks x",
                             "blocks / backend"], gemms, numbers_right=True, rule=True)
    return "\n".join(lines)

"""``python -m minitorch_accum.kernels`` (and ``maccum kernels``): list the kernels,
compile every CUDA source through NVRTC, show registers and shared memory."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from minitorch_accum.kernels.catalog import CATALOG

__all__ = ["main"]


def _list() -> int:
    width = max(len(k.name) for k in CATALOG)
    print(f"{'kernel':<{width}}  B/elem fp32  computes")
    for k in CATALOG:
        note = f"  [{k.note}]" if k.note else ""
        print(f"{k.name:<{width}}  {k.bytes_fp32:>11}  {k.computes}{note}")
    return 0


def _resource_usage(paths: Sequence[Path], arch: str) -> int:
    from minitorch_accum.kernels.resource_usage import find_nvcc, resource_usage

    nvcc = find_nvcc()
    if nvcc is None:
        print("nvcc not found: no register/shared-memory report (needs a CUDA toolkit)")
        return 0
    failed = 0
    for path in paths:
        try:
            records = resource_usage(path, arch, nvcc)
        except RuntimeError as error:
            print(error)
            failed += 1
            continue
        print(f"\n{path.name} ({arch}, nvcc --resource-usage)")
        width = max([len(r.kernel) for r in records] + [6])
        print(f"  {'kernel':<{width}}  registers  smem B  stack B  spills (st/ld)")
        for r in records:
            print(
                f"  {r.kernel:<{width}}  {r.registers:>9}  {r.shared_bytes:>6}  {r.stack_bytes:>7}  "
                f"{r.spill_stores}/{r.spill_loads}"
            )
    return 1 if failed else 0


def _compile(arch: str, with_resources: bool) -> int:
    from minitorch_accum.kernels.nvrtc import NvrtcNotFoundError, compile_all, nvrtc_version
    from minitorch_accum.kernels.sources import cuda_sources

    try:
        major, minor = nvrtc_version()
        results = compile_all(arch)
    except NvrtcNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"NVRTC {major}.{minor}, --gpu-architecture={arch}")
    for r in results:
        status = "OK  " if r.ok else "FAIL"
        print(f"{status} {r.name}: {len(r.entries)} kernels, {r.binary_bytes} bytes, {r.seconds:.2f} s")
        if r.log:
            print("\n".join(f"     {line}" for line in r.log.splitlines()))
    status = 0 if all(r.ok for r in results) else 1
    if with_resources and status == 0:
        status = _resource_usage(cuda_sources(), arch)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (non-zero when a source fails to compile)."""
    parser = argparse.ArgumentParser(
        prog="python -m minitorch_accum.kernels",
        description="The fused accumulation kernels: list them, compile their CUDA sources.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="each kernel, what it computes, bytes per element (fp32)")
    compile_cmd = sub.add_parser("compile", help="compile every .cu file through NVRTC")
    compile_cmd.add_argument("--arch", default="sm_90", help="target, e.g. sm_90 or compute_90 (default sm_90)")
    compile_cmd.add_argument(
        "--resource-usage", action="store_true", help="also print registers and shared memory per kernel (needs nvcc)"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command == "list":
        return _list()
    return _compile(args.arch, args.resource_usage)

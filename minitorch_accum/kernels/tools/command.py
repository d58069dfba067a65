"""``python -m minitorch_accum.kernels`` (and ``maccum kernels``): list the kernels,
compile every CUDA source through NVRTC, show registers and shared memory, write the
native module's stub from the catalog.

Exit status: 0 when everything asked for was done, 1 when a source failed to
compile (or nvcc failed) or ``stub --check`` found the stub out of date, 2 for a
usage error (an unknown or unsupported architecture, no NVRTC, --resource-usage
without nvcc)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from minitorch_accum.kernels.catalog import CATALOG, WINDOW_PASSES
from minitorch_accum.kernels.tools.nvrtc import DEFAULT_ARCH

__all__ = ["main"]

_ARCH = re.compile(r"(sm|compute)_(\d+)[af]?")


def _list() -> int:
    width = max(len(k.name) for k in CATALOG + WINDOW_PASSES)
    for title, rows in (("kernel", CATALOG), ("window pass", WINDOW_PASSES)):
        if rows is WINDOW_PASSES:
            print("\nthe accumulation layer's own passes (traces and maccum explain name them; not kernels of csrc/):")
        print(f"{title:<{width}}  B/elem fp32  computes")
        for k in rows:
            notes = [n for n in (k.note, "" if k.figure_dtypes == "fp32" else f"{k.figure_dtypes} figure") if n]
            note = f"  [{'; '.join(notes)}]" if notes else ""
            print(f"{k.name:<{width}}  {k.bytes_fp32:>11}  {k.computes}{note}")
    return 0


def _stub(check: bool) -> int:
    from minitorch_accum.kernels.tools import stub

    try:
        return _stub_command(stub, check)
    except ValueError as error:  # the stub's hand-written parts are not where they belong
        return _error(str(error))


def _stub_command(stub: Any, check: bool) -> int:
    if check:
        diff = stub.differences()
        if diff:
            print(diff, end="")
            print(f"error: {stub.stub_path()} is out of date; run `{stub.STUB_COMMAND}`", file=sys.stderr)
            return 1
        print(f"{stub.stub_path()} is current")
        return 0
    changed = stub.write()
    print(f"{'wrote' if changed else 'unchanged:'} {stub.stub_path()}")
    return 0


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _architecture(value: str) -> str:
    """argparse type of --arch: the spelling only (what NVRTC supports is checked once it is loaded)."""
    if not _ARCH.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a GPU architecture: give sm_XX (a cubin) or compute_XX (PTX), e.g. {DEFAULT_ARCH}"
        )
    return value


def _resource_usage(paths: Sequence[Path], arch: str) -> int:
    from minitorch_accum.kernels.tools.resource_usage import find_nvcc, resource_usage

    nvcc = find_nvcc()
    if nvcc is None:
        return _error("--resource-usage needs nvcc (a CUDA toolkit on PATH or in CUDA_HOME); none was found")
    failed = 0
    for path in paths:
        try:
            records = resource_usage(path, arch, nvcc)
        except RuntimeError as error:
            print(error, file=sys.stderr)
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
    from minitorch_accum.kernels.sources import cuda_sources
    from minitorch_accum.kernels.tools.nvrtc import (
        NvrtcNotFoundError,
        compile_all,
        nvrtc_version,
        supported_archs,
    )

    try:
        major, minor = nvrtc_version()
        supported = supported_archs()
    except NvrtcNotFoundError as error:
        return _error(str(error))
    capability = int(_ARCH.fullmatch(arch).group(2))  # type: ignore[union-attr]
    if capability not in supported:
        names = ", ".join(f"sm_{c}" for c in supported)
        return _error(f"NVRTC {major}.{minor} cannot compile for {arch}; it supports {names} (and compute_XX of each)")
    print(f"NVRTC {major}.{minor}, --gpu-architecture={arch}")
    results = compile_all(arch)
    for r in results:
        status = "OK  " if r.ok else "FAIL"
        print(f"{status} {r.name}: {len(r.entries)} kernels, {r.binary_bytes} bytes, {r.seconds:.2f} s")
        if r.log:
            print("\n".join(f"     {line}" for line in r.log.splitlines()))
    failed = [r.name for r in results if not r.ok]
    if failed:
        print(f"error: {len(failed)} of {len(results)} CUDA sources failed to compile for {arch}", file=sys.stderr)
        return 1
    return _resource_usage(cuda_sources(), arch) if with_resources else 0


def main(argv: Sequence[str] | None = None, prog: str = "python -m minitorch_accum.kernels") -> int:
    """Run the command line; returns the exit status (non-zero when a source fails to compile).
    ``prog``: how usage and errors name the command (``maccum kernels`` from the maccum script)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="The fused accumulation kernels: list them, compile their CUDA sources.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{list,compile,stub}")
    sub.add_parser(
        "list",
        help="each kernel, what it computes, bytes per element (fp32)",
        description="Print each kernel, what it computes and the bytes per element it moves (fp32).",
    )
    compile_cmd = sub.add_parser(
        "compile",
        help="compile every .cu file through NVRTC (no GPU needed)",
        description="Compile every CUDA source (csrc/*.cu) through NVRTC, as the CuPy path does on a GPU. "
        "Exits 1 when a source fails to compile, 2 for an architecture NVRTC does not support.",
    )
    compile_cmd.add_argument(
        "--arch",
        type=_architecture,
        default=DEFAULT_ARCH,
        help="sm_XX (a cubin) or compute_XX (PTX) (default: %(default)s)",
    )
    compile_cmd.add_argument(
        "--resource-usage",
        action="store_true",
        help="print registers and shared memory too (needs nvcc)",
    )
    stub_cmd = sub.add_parser(
        "stub",
        help="write minitorch_accum/_native.pyi from the catalog",
        description="Write the native module's stub, minitorch_accum/_native.pyi, from the catalog of kernels "
        "(kernels/catalog.py). With --check, write nothing: exit 1 and print the difference when it is out of date.",
    )
    stub_cmd.add_argument("--check", action="store_true", help="only say whether the stub is current")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command == "list":
        return _list()
    if args.command == "stub":
        return _stub(args.check)
    return _compile(args.arch, args.resource_usage)

"""Registers and shared memory per kernel, from ``nvcc --resource-usage``.

Needs nvcc (a CUDA toolkit); NVRTC alone does not report them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from minitorch_accum.kernels.launch.cuda_module import NVRTC_OPTIONS

__all__ = ["KernelResources", "find_nvcc", "parse_resource_usage", "resource_usage"]

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


@dataclass(frozen=True)
class KernelResources:
    kernel: str
    arch: str
    registers: int
    shared_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int


def find_nvcc() -> str | None:
    """nvcc on PATH, else under CUDA_HOME/CUDA_PATH; None when there is none."""
    found = shutil.which("nvcc")
    if found:
        return found
    for env in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(env)
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


def parse_resource_usage(text: str) -> list[KernelResources]:
    """Parse ptxas's -v / --resource-usage report into one record per kernel."""
    records: list[KernelResources] = []
    current: dict[str, object] | None = None

    def flush() -> None:
        if current is not None:
            records.append(KernelResources(**current))  # type: ignore[arg-type]

    for line in text.splitlines():
        if entry := _ENTRY.search(line):
            flush()
            current = dict(
                kernel=entry.group(1),
                arch=entry.group(2),
                registers=0,
                shared_bytes=0,
                stack_bytes=0,
                spill_stores=0,
                spill_loads=0,
            )
        elif current is not None and (frame := _FRAME.search(line)):
            current.update(
                stack_bytes=int(frame.group(1)), spill_stores=int(frame.group(2)), spill_loads=int(frame.group(3))
            )
        elif current is not None and (used := _USED.search(line)):
            current["registers"] = int(used.group(1))
            smem = _SMEM.search(line)
            current["shared_bytes"] = int(smem.group(1)) if smem else 0
    flush()
    return records


def resource_usage(path: Path, arch: str = "sm_90", nvcc: str | None = None) -> list[KernelResources]:
    """Compile one .cu file with nvcc -cubin --resource-usage and report each kernel."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found (install a CUDA toolkit or set CUDA_HOME)")
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            nvcc,
            "-cubin",
            f"-arch={arch}",
            "--resource-usage",
            *NVRTC_OPTIONS,
            "-o",
            str(Path(tmp) / "out.cubin"),
            str(path),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nvcc failed on {path}:\n{done.stderr.strip()}")
    return parse_resource_usage(done.stdout + "\n" + done.stderr)

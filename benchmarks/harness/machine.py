"""Facts about the machine a run measured, for the result files: CPU, cores, SIMD level,
library versions, BLAS libraries and the kernel each chose (and the environment variables that
choose it), threads, load, and (when present) the GPU.

The BLAS kernel matters as much as the CPU: OpenBLAS picks its GEMM kernel at load time from
the CPU, unless ``OPENBLAS_CORETYPE`` names one (an AMD EPYC machine of this project sets
``OPENBLAS_CORETYPE=Haswell``, which on an AVX-512 CPU runs the AVX2 kernel), and
``OPENBLAS_L2_SIZE`` changes its blocking. The same command measured 0.50x PyTorch on one
machine and 0.89x on another without a word on why (issue 27); every header now says.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
from pathlib import Path
from typing import Any

__all__ = ["BLAS_ENVIRONMENT", "blas_environment", "blas_libraries", "blas_line", "blas_threads", "cpu_caches",
           "loadavg", "machine_info", "machine_line", "native_simd", "threads_line", "torch_blas"]

#: the environment variables that choose OpenBLAS's kernel and its blocking
BLAS_ENVIRONMENT = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def machine_info() -> dict[str, Any]:
    """CPU, cores, library versions and (when present) the GPU, for the result files."""
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpuinfo("model name") or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "caches": cpu_caches(),
    }
    import numpy

    from minitorch_accum.backend import retained_memory, thread_summary

    info["numpy"] = numpy.__version__
    # every pool's threads (BLAS, OpenMP, the native kernels', torch's) as this process has them
    info["threads"] = thread_summary()
    info["blas"] = blas_libraries()
    info["blas_environment"] = blas_environment()
    info["malloc"] = retained_memory()
    for name in ("scipy", "torch", "cupy"):
        try:
            module = __import__(name)
            info[name] = module.__version__
        except Exception:
            info[name] = None
    try:
        from minitorch_accum import cuda_available

        if cuda_available():
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            info["gpu"] = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    except Exception:
        info["gpu"] = None
    return info


def blas_libraries() -> list[dict[str, Any]]:
    """Each BLAS library this process has loaded (threadpoolctl): who ships it, its API and
    version, the kernel it chose (``architecture``: SkylakeX, Haswell, Zen...), its threading
    layer and threads. NumPy's OpenBLAS is loaded by importing NumPy; SciPy's only once used."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    libraries = []
    for info in threadpool_info():
        if info.get("user_api") != "blas":
            continue
        path = str(info.get("filepath", ""))
        owner = next((name for name in ("numpy", "scipy", "torch", "sklearn") if f"{os.sep}{name}" in path), "")
        libraries.append({"library": f"{owner} {info.get('internal_api', '?')}".strip(),
                          "version": info.get("version"), "architecture": info.get("architecture"),
                          "threading_layer": info.get("threading_layer"), "threads": info.get("num_threads")})
    return libraries


def blas_environment() -> dict[str, str | None]:
    """``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` as this process sees them (None: not set)."""
    return {name: os.environ.get(name) for name in BLAS_ENVIRONMENT}


def torch_blas(torch: Any) -> dict[str, str | None]:
    """What PyTorch computes its GEMMs with, from its build configuration: the BLAS (``mkl`` in
    the CPU wheels, statically linked, which threadpoolctl cannot see), its version line and the
    CPU capability its kernels dispatch to (AVX512, AVX2)."""
    text = torch.__config__.show()
    found: dict[str, str | None] = {"blas": None, "blas_version": None, "cpu_capability": None}
    for line in text.splitlines():
        line = line.strip(" -")
        if "BLAS_INFO=" in line:
            found["blas"] = line.split("BLAS_INFO=", 1)[1].split(",", 1)[0]
        elif "Math Kernel Library" in line or line.startswith("OpenBLAS"):
            found["blas_version"] = line
        elif line.startswith("CPU capability usage:"):
            found["cpu_capability"] = line.split(":", 1)[1].strip()
    return found


def blas_line(machine: dict[str, Any]) -> str:
    """``BLAS: numpy openblas 0.3.31, kernel SkylakeX (pthreads, 2 threads); OPENBLAS_CORETYPE unset, ...``"""
    libraries = machine.get("blas")
    if libraries is None:
        return "BLAS: not recorded"
    parts = [f"{b['library']} {b['version']}, kernel {b['architecture']} ({b['threading_layer']}, {b['threads']} "
             f"thread{'s' if b['threads'] != 1 else ''})" for b in libraries] or ["none loaded"]
    env = machine.get("blas_environment", {})
    variables = ", ".join(f"{name}={env[name]}" if env.get(name) is not None else f"{name} unset"
                          for name in BLAS_ENVIRONMENT)
    return f"BLAS: {'; '.join(parts)}; {variables}"


def machine_line(machine: dict[str, Any]) -> str:
    """The header line every benchmark prints first: CPU model, cores, the BLAS and its kernel."""
    return f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores; {blas_line(machine)}"


def cpu_caches() -> dict[str, int]:
    """Data and unified cache sizes in bytes by level (``L1d``, ``L2``, ``L3``), as the kernel
    reports them for CPU 0 (Linux; empty elsewhere). A virtual machine may report its host's."""
    caches: dict[str, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = (index / "level").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction" or not size:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        number = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
        caches[f"L{level}d" if kind == "Data" else f"L{level}"] = number
    return caches


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` line of /proc/cpuinfo (None off Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def native_simd() -> dict[str, Any]:
    """Which vector loops the native kernels run: the widest of AVX-512 / AVX2 / SSE2 the CPU has
    (csrc/native/simd.h), unless MTA_SIMD caps it."""
    flags_line = _cpuinfo("flags")
    flags = set(flags_line.split()) if flags_line else set()
    avx512 = {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= flags
    level = "avx512" if avx512 else "avx2" if "avx2" in flags else "baseline" if flags else "unknown"
    cap = os.environ.get("MTA_SIMD")
    if cap == "baseline" or (cap == "avx2" and level == "avx512"):
        level = cap
    return {"level": level, "MTA_SIMD": cap}


def blas_threads() -> int:
    """Threads of the BLAS NumPy's matmul uses (NumPy's bundled OpenBLAS when present)."""
    try:
        from threadpoolctl import threadpool_info

        blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
        ours = [i for i in blas if "numpy" in str(i.get("filepath", ""))] or blas
        if ours:
            return int(ours[0]["num_threads"])
    except Exception:
        pass
    return os.cpu_count() or 1


def loadavg() -> list[float] | None:
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def threads_line(machine: dict[str, Any]) -> str:
    """The header line every benchmark prints: each pool's threads when the run was measured."""
    return f"threads: {machine.get('threads', 'not recorded')}"

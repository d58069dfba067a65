"""Compile the CUDA sources with NVRTC, loaded through ctypes, without a GPU.

The library comes from the nvidia-cuda-nvrtc wheel (nvidia/cu13/lib or the
older nvidia/cuda_nvrtc/lib layout), from CUDA_HOME/CUDA_PATH, or from the
system loader path. CI installs the wheel, so every .cu file is compiled there
for sm_90 and a kernel that does not compile never lands.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from minitorch_accum.kernels.launch.cuda_module import NVRTC_OPTIONS
from minitorch_accum.kernels.sources import cuda_sources, source_text

__all__ = [
    "DEFAULT_ARCH",
    "CompileResult",
    "NvrtcNotFoundError",
    "compile_all",
    "compile_file",
    "compile_source",
    "find_nvrtc",
    "nvrtc_version",
    "supported_archs",
]

DEFAULT_ARCH = "sm_90"

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_]\w*)\s*\(")


class NvrtcNotFoundError(RuntimeError):
    """No libnvrtc could be found or loaded."""


@dataclass(frozen=True)
class CompileResult:
    """The outcome of compiling one source: ok, the compiler log, the kernels (PTX entries) it produced."""

    name: str
    arch: str
    ok: bool
    log: str
    entries: tuple[str, ...]
    binary_bytes: int
    seconds: float
    ptx: str = field(default="", repr=False)


def _candidates() -> list[Path]:
    found: list[Path] = []
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in map(Path, roots):
        for sub in ("cu13/lib", "cu12/lib", "cuda_nvrtc/lib"):
            found += sorted((root / sub).glob("libnvrtc.so*"), reverse=True)
            found += sorted((root / sub.replace("lib", "bin")).glob("nvrtc64*.dll"), reverse=True)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(env)
        if home:
            for sub in ("lib64", "lib", "bin"):
                found += sorted((Path(home) / sub).glob("libnvrtc.so*"), reverse=True)
                found += sorted((Path(home) / sub).glob("nvrtc64*.dll"), reverse=True)
    found += sorted(Path("/usr/local/cuda/lib64").glob("libnvrtc.so*"), reverse=True)
    # the builtins library sits beside libnvrtc and is not the compiler itself
    return [p for p in found if "builtins" not in p.name]


def find_nvrtc() -> Path | str:
    """The NVRTC library to load: a path, or a bare name for the system loader."""
    for path in _candidates():
        if path.is_file():
            return path
    for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return name
    raise NvrtcNotFoundError(
        "libnvrtc not found: install the nvidia-cuda-nvrtc wheel (pip install nvidia-cuda-nvrtc, "
        "part of the test extra) or set CUDA_HOME to a CUDA toolkit"
    )


@functools.cache
def _library() -> ctypes.CDLL:
    where = find_nvrtc()
    try:
        lib = ctypes.CDLL(str(where))
    except OSError as error:
        raise NvrtcNotFoundError(f"cannot load {where}: {error}") from error
    handle = ctypes.c_void_p
    size = ctypes.POINTER(ctypes.c_size_t)
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    lib.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    lib.nvrtcGetNumSupportedArchs.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.nvrtcGetSupportedArchs.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.nvrtcCreateProgram.argtypes = [
        ctypes.POINTER(handle),
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
    ]
    lib.nvrtcCompileProgram.argtypes = [handle, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(handle)]
    for getter in ("ProgramLog", "PTX", "CUBIN"):
        getattr(lib, f"nvrtcGet{getter}Size").argtypes = [handle, size]
        getattr(lib, f"nvrtcGet{getter}").argtypes = [handle, ctypes.c_char_p]
    return lib


def nvrtc_version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def supported_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC compiles for (90 for sm_90 / compute_90)."""
    lib = _library()
    count = ctypes.c_int()
    _check(lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * count.value)()
    _check(lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return tuple(archs)


def _check(result: int, call: str) -> None:
    if result != 0:
        message = _library().nvrtcGetErrorString(result)
        raise RuntimeError(f"{call} failed: {message.decode() if message else result}")


def _read(lib: ctypes.CDLL, program: ctypes.c_void_p, what: str) -> bytes:
    n = ctypes.c_size_t()
    if getattr(lib, f"nvrtcGet{what}Size")(program, ctypes.byref(n)) != 0 or n.value == 0:
        return b""
    buffer = ctypes.create_string_buffer(n.value)
    if getattr(lib, f"nvrtcGet{what}")(program, buffer) != 0:
        return b""
    return buffer.raw[: n.value]


def compile_source(
    source: str, name: str, arch: str = DEFAULT_ARCH, options: Sequence[str] = NVRTC_OPTIONS
) -> CompileResult:
    """Compile CUDA source text for ``arch`` (sm_XX or compute_XX) with the kernels' options."""
    lib = _library()
    program = ctypes.c_void_p()
    started = time.perf_counter()
    _check(
        lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(), 0, None, None),
        "nvrtcCreateProgram",
    )
    try:
        flags = [f"--gpu-architecture={arch}", *options]
        argv = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
        result = lib.nvrtcCompileProgram(program, len(flags), argv)
        log = _read(lib, program, "ProgramLog").rstrip(b"\0").decode(errors="replace").strip()
        ok = result == 0
        ptx = _read(lib, program, "PTX").decode(errors="replace") if ok else ""
        binary = _read(lib, program, "CUBIN") if ok and arch.startswith("sm_") else ptx.encode()
        if not ok and not log:
            log = lib.nvrtcGetErrorString(result).decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))
    return CompileResult(
        name=name,
        arch=arch,
        ok=ok,
        log=log,
        entries=tuple(sorted(_ENTRY.findall(ptx))),
        binary_bytes=len(binary),
        seconds=time.perf_counter() - started,
        ptx=ptx,
    )


def compile_file(path: Path, arch: str = DEFAULT_ARCH) -> CompileResult:
    """Compile one shipped .cu file (local includes inlined, errors at the real file:line)."""
    return compile_source(source_text(path), str(path), arch)


def compile_all(arch: str = DEFAULT_ARCH) -> list[CompileResult]:
    """Compile every shipped .cu file for ``arch``."""
    return [compile_file(path, arch) for path in cuda_sources()]

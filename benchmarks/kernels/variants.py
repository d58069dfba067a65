"""The timed variants of a case: the native kernels, what a NumPy (or CuPy) user and a
PyTorch user write, and the copy/triad that measure the machine's memory-bandwidth limit.

Each variant carries the useful bytes per element it must move; GB/s are computed from those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.kernels.arrays import DeviceArrays
from benchmarks.kernels.settings import SCALE
from minitorch_accum import kernels as K

__all__ = ["Variant", "accumulate_variants", "array_library_variants", "bfloat16_variants", "limit_variants",
           "shown_name", "torch_variants", "variant_path"]

#: the prefix of the library's own kernel variants in the result files (kept, so results of every
#: date compare); the path that really ran is each figure's ``path``, and tables and plots show it
LIBRARY_PREFIX = "native_"


def variant_path(name: str, on_host: bool) -> str:
    """What ran variant ``name``: the library's kernels on ``kernel_path()`` (native, emulated,
    reference) or CuPy's CUDA kernels; NumPy's or CuPy's arithmetic; PyTorch."""
    if name.startswith(LIBRARY_PREFIX):
        return K.kernel_path() if on_host else "cupy"
    if name.startswith("torch_"):
        return "torch"
    return "numpy" if on_host else "cupy"


def shown_name(name: str, figure: dict[str, Any]) -> str:
    """The variant as tables and plots name it: ``emulated_arena`` when MTA_KERNELS=emulated ran it."""
    path = figure.get("path")
    if path and name.startswith(LIBRARY_PREFIX):
        return path + "_" + name.removeprefix(LIBRARY_PREFIX)
    return name


@dataclass
class Variant:
    """One timed callable and the useful bytes per element it must move."""

    name: str
    label: str
    bytes_per_element: int
    run: Callable[[], Any]
    role: str = "accumulate"  # "accumulate", "copy" or "triad" (the last two make the limit line)
    note: str = ""
    # bytes per element the memory bus moves beyond the useful ones, on a CPU: a store to a
    # line never read first costs a write-allocate read (4 per fp32 element for copies,
    # triads and copy_scale, none for add_scale, which reads acc anyway), and a two-pass
    # triad moves its destination twice; the limit and the fractions use these bus bytes
    extra_bus_bytes: int = 0


def accumulate_variants(acc: Any, g: Any, g16: Any | None, comp: Any, copy_out: Any) -> list[Variant]:
    """Kernels on one flat buffer: the arena call and its kin."""
    s = SCALE
    variants = [
        Variant("native_arena", "add_scale over the flat arena buffer", 12, lambda: K.add_scale(acc, g, s)),
        Variant("native_copy_scale", "copy_scale (acc = s*g)", 8, lambda: K.copy_scale(copy_out, g, s),
                extra_bus_bytes=4),
        Variant(
            "native_add_scale_compensated",
            "add_scale_compensated (Neumaier)",
            20,
            lambda: K.add_scale_compensated(acc, comp, g, s),
        ),
    ]
    if g16 is not None:
        variants.append(
            Variant("native_cast_add_scale", "cast_add_scale bf16 -> fp32", 10, lambda: K.cast_add_scale(acc, g16, s))
        )
    return variants


#: the stochastic kernels' stream key in the benchmark: a seed, window, micro-batch (their values cost nothing)
STREAM = (2024, 3, 1)


def bfloat16_variants(acc16: Any, g: Any, g16: Any | None) -> list[Variant]:
    """Into a bfloat16 buffer (host only: CuPy has no bfloat16 arrays): to nearest, and stochastically
    with the Philox stream, whose bits must not make the kernel compute-bound."""
    s = SCALE
    variants = [
        Variant("native_add_scale_bf16", "add_scale into bf16, to nearest", 8, lambda: K.add_scale(acc16, g, s)),
        Variant("native_add_scale_stochastic", "add_scale_stochastic into bf16 (Philox4x32-10)", 8,
                lambda: K.add_scale_stochastic(acc16, g, s, *STREAM)),
        Variant("native_copy_scale_stochastic", "copy_scale_stochastic into bf16", 6,
                lambda: K.copy_scale_stochastic(acc16, g, s, *STREAM), extra_bus_bytes=2),
    ]
    if g16 is not None:
        variants.append(Variant("native_cast_add_scale_stochastic", "cast_add_scale_stochastic bf16 -> bf16", 6,
                                lambda: K.cast_add_scale_stochastic(acc16, g16, s, *STREAM)))
    return variants


def array_library_variants(
    arrays: DeviceArrays, acc: Any, g: Any, tmp: Any, per_tensor: bool, pairs: list[tuple[Any, Any, Any]] | None = None
) -> list[Variant]:
    """What a NumPy (or CuPy) user writes: ``acc += s*g``, and the two-op form with ``out=``."""
    s = SCALE
    lib = "NumPy" if arrays.on_host else "CuPy"
    ops = arrays.xp
    items = pairs if pairs is not None else [(acc, g, tmp)]

    def naive() -> None:
        for a, b, _ in items:
            a += s * b

    def two_op_out() -> None:
        for a, b, t in items:
            ops.multiply(b, s, out=t)
            ops.add(a, t, out=a)

    where = " (per tensor)" if per_tensor else ""
    return [
        Variant(
            "numpy_naive",
            f"{lib} acc += s*g{where}",
            12,
            naive,
            note="moves 20 B/elem in reality (the temporary is written and read back); charged 12",
        ),
        Variant(
            "numpy_out",
            f"{lib} multiply+add with out={where}",
            12,
            two_op_out,
            note="moves 20 B/elem in reality (tmp written and read back); charged 12",
        ),
    ]


def torch_variants(
    arrays: DeviceArrays, accs: list[Any], gs: list[Any], g16s: list[Any] | None, acc_flat: Any, g_flat: Any
) -> list[Variant]:
    """PyTorch on the same memory: foreach over the list, one flat ``add_``, and its mixed bf16 path."""
    if arrays.torch is None:
        return []
    torch = arrays.torch.module
    s = SCALE
    taccs = [arrays.as_torch(a) for a in accs]
    tgs = [arrays.as_torch(g) for g in gs]
    tacc, tg = arrays.as_torch(acc_flat), arrays.as_torch(g_flat)
    variants = [
        Variant(
            "torch_foreach",
            "torch._foreach_add_(accs, gs, alpha=s)",
            12,
            lambda: torch._foreach_add_(taccs, tgs, alpha=s),
        ),
        Variant("torch_flat", "torch flat acc.add_(g, alpha=s)", 12, lambda: tacc.add_(tg, alpha=s)),
    ]
    if g16s is not None:
        tg16s = [arrays.as_torch(g) for g in g16s]
        if arrays.mixed_path == "foreach":
            mixed: Callable[[], Any] = lambda: torch._foreach_add_(taccs, tg16s, alpha=s)  # noqa: E731
            label = "torch._foreach_add_(accs fp32, gs bf16, alpha=s)"
        else:

            def mixed() -> None:
                for a, b in zip(taccs, tg16s, strict=True):
                    a.add_(b, alpha=s)

            label = "torch acc.add_(g bf16, alpha=s) per tensor"
        variants.append(Variant("torch_mixed", label, 10, mixed, note=f"PyTorch mixed path: {arrays.mixed_path}"))
    return variants


def limit_variants(arrays: DeviceArrays, dst: Any, b: Any, c: Any) -> list[Variant]:
    """Copy (dst = c) and triad (dst = b + s*c): the bandwidth this machine shows in the same run."""
    s = SCALE
    ops = arrays.xp
    lib = "NumPy" if arrays.on_host else "CuPy"
    variants = [
        Variant("copy_array_library", f"{lib} copyto", 8, lambda: ops.copyto(dst, c), role="copy",
                extra_bus_bytes=4),
        Variant("copy_native", "copy_scale with s=1", 8, lambda: K.copy_scale(dst, c, 1.0), role="copy",
                extra_bus_bytes=4),
    ]
    if arrays.on_host:

        def triad_two_pass() -> None:
            np.multiply(c, s, out=dst)
            np.add(dst, b, out=dst)

        variants.append(
            Variant(
                "triad_array_library",
                "NumPy triad (two passes, out=)",
                12,
                triad_two_pass,
                role="triad",
                note="two passes: moves 24 B/elem on the bus (write-allocate included); charged 12",
                extra_bus_bytes=12,
            )
        )
    else:
        import cupy

        triad_kernel = cupy.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "mta_bench_triad")
        scale = np.float32(s)
        variants += [
            Variant(
                "copy_memcpy",
                "cudaMemcpy D2D",
                8,
                lambda: cupy.cuda.runtime.memcpyAsync(
                    dst.data.ptr,
                    c.data.ptr,
                    c.nbytes,
                    cupy.cuda.runtime.memcpyDeviceToDevice,
                    cupy.cuda.get_current_stream().ptr,
                ),
                role="copy",
            ),
            Variant(
                "triad_array_library",
                "CuPy elementwise triad",
                12,
                lambda: triad_kernel(b, c, scale, dst),
                role="triad",
            ),
        ]
    if arrays.torch is not None:
        torch = arrays.torch.module
        tdst, tb, tc = arrays.as_torch(dst), arrays.as_torch(b), arrays.as_torch(c)
        variants += [
            Variant("copy_torch", "torch dst.copy_(src)", 8, lambda: tdst.copy_(tc), role="copy", extra_bus_bytes=4),
            Variant(
                "triad_torch",
                "torch.add(b, c, alpha=s, out=a)",
                12,
                lambda: torch.add(tb, tc, alpha=s, out=tdst),
                role="triad",
                extra_bus_bytes=4,
            ),
        ]
    return variants

"""Kernel microbenchmark: the fused accumulation kernels against NumPy, PyTorch and the
machine's own memory bandwidth, measured side by side in one run.

Two kinds of case:

- a size sweep: one flat buffer of n elements (2^10 ... 2^26 on a CPU, 2^28 on a GPU).
  With a single buffer, "per tensor", "multi-tensor" and "arena" are the same call,
  so the sweep times the arena call (one add_scale over the flat buffer) only;
- a model-shaped list: the parameter shapes of a GPT-2-small-like model (148
  tensors, 124.4M elements) laid out in a real ``GradArena`` (64-byte aligned
  views into one flat buffer), with the gradients in a twin arena of the same
  layout. Here per-tensor calls, one multi-tensor call and one call over the flat
  buffer are timed on the same memory, as are PyTorch's foreach and flat ``add_``
  (``torch.from_numpy`` / DLPack wrap the very same buffers).

Every variant of a case is timed interleaved (``harness.time_interleaved``) after
warm-up rounds; figures are medians. Small sizes run a call several times per sample
so a sample is long enough to time. Bandwidth is computed from the bytes a kernel
must move ("useful bytes": add_scale 12 B/elem, copy_scale 8, cast_add_scale from
bf16 10, compensated 20); NumPy's two-op ``acc += s*g`` really moves more (its
temporary is written and read back) but is charged the same 12 B so that GB/s
compare as speed. The limit line is the best copy or triad bandwidth measured in
the same case (NumPy, native, PyTorch and, on a GPU, cudaMemcpy D2D).

PyTorch's OpenMP workers are given the same idle spin as the native pool's helpers
(GOMP_SPINCOUNT, set only while torch is first imported here; see
TORCH_GOMP_SPINCOUNT): with libgomp's default they keep spinning for milliseconds
after each torch op and starve the native helper of its core in an interleaved run.

    python -m minitorch_accum.bench.kernels --quick
    maccum bench kernels --device cuda --out /tmp/results
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from minitorch_accum import kernels as K
from minitorch_accum.bench.harness import machine_info, median, results_dir, time_interleaved, write_results
from minitorch_accum.kernels.dtypes import BFLOAT16

__all__ = [
    "GPT2_SMALL_SHAPES",
    "Settings",
    "full_settings",
    "gpt2_small_shapes",
    "main",
    "quick_settings",
    "run_kernels",
]

BENCHMARK = "kernels"
SCALE = 0.1  # 1/k for a window of k = 10 micro-batches: not a power of two, so the multiply rounds

# The targets (issue 7, kernel half).
CPU_TARGET_MIN_ELEMENTS = 1 << 22
CPU_VS_NUMPY = 1.3  # arena add_scale >= 1.3x NumPy `acc += s*g`
CPU_VS_TORCH_FOREACH = 0.95  # arena add_scale >= 0.95x torch._foreach_add_
CPU_FRACTION_OF_LIMIT = 0.80  # arena add_scale >= 80% of the measured copy/triad bandwidth
CPU_CAST_VS_TORCH_MIXED = 1.5  # cast_add_scale (bf16 into fp32) >= 1.5x PyTorch's mixed-dtype path
GPU_TARGET_MIN_ELEMENTS = 1 << 26
GPU_FRACTION_OF_COPY = 0.85  # arena add_scale >= 85% of the measured D2D copy bandwidth
GPU_MULTI_VS_TORCH_FOREACH = 1.1  # model-shaped multi-tensor launch >= 1.1x torch._foreach_add_

Log = Callable[[str], None]


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """What one run measures. ``model_divisor`` divides every dimension of the model shapes."""

    device: str = "cpu"
    sizes: tuple[int, ...] = tuple(1 << k for k in range(10, 27))
    warmup: int = 2
    repeats: int = 21  # rounds for cases of 2^20 elements and more
    small_repeats: int = 41  # rounds below 2^20 elements, where samples are short and noisier
    min_sample_bytes: int = 48 << 20  # small cases loop a call until a sample moves this many useful bytes
    model_divisor: int = 1
    model_repeats: int = 15
    quick: bool = False
    notes: tuple[str, ...] = ()
    # cases from this many elements are checked against the targets (None: the
    # issue's 2^22 on a CPU, 2^26 on a GPU; the model-shaped list always on a GPU)
    target_min_elements: int | None = None
    # give torch's OpenMP workers the native pool's idle spin (see TORCH_GOMP_SPINCOUNT)
    match_torch_spin: bool = True

    def repeats_for(self, elements: int) -> int:
        return self.repeats if elements >= 1 << 20 else self.small_repeats


def full_settings(device: str = "cpu") -> Settings:
    """The recorded run: 2^10 ... 2^26 elements on a CPU (2^28 on a GPU), the full GPT-2-small list."""
    if device == "cuda":
        return Settings(
            device="cuda",
            sizes=tuple(1 << k for k in range(10, 29)),
            repeats=11,
            small_repeats=15,
            # small GPU cases are bound by Python-side launches (~10-30 us each): 2 MiB per sample
            # keeps a sample over 1 ms and the whole run within the 150 s gpu_check.sh gives it
            min_sample_bytes=2 << 20,
            model_repeats=11,
            notes=("GPU: sizes 2^10 ... 2^28, CUDA-event timing (harness timer hook), 11-15 rounds",),
        )
    return Settings(
        device="cpu",
        notes=(
            "CPU full mode is capped at 2^26 elements (256 MiB per fp32 array), 21 rounds for cases of 2^20 "
            "elements and more (41 below) and 15 for the model-shaped list: about a minute on 2 cores",
        ),
    )


def quick_settings(device: str = "cpu") -> Settings:
    """A run of seconds: three sizes, fewer rounds, the model shapes at 1/8 of each dimension."""
    return Settings(
        device=device,
        sizes=(1 << 12, 1 << 18, 1 << 22),
        warmup=1,
        repeats=5,
        small_repeats=9,
        min_sample_bytes=16 << 20,
        model_divisor=8,
        model_repeats=5,
        quick=True,
        notes=(
            "quick mode: sizes 2^12, 2^18, 2^22 only, 5-9 rounds, and the model shapes scaled down to 1/8 of "
            "each dimension (about 1/64 of the elements); its figures are indicative, the full mode's are recorded",
        ),
    )


# ---------------------------------------------------------------- model shapes


def gpt2_small_shapes(divisor: int = 1) -> list[tuple[str, tuple[int, ...]]]:
    """Parameter names and shapes of a GPT-2-small-like model (148 tensors, 124.4M elements
    at divisor 1); every dimension is divided by ``divisor`` (rounded down, at least 1)."""

    def d(x: int) -> int:
        return max(1, x // divisor)

    vocab, context, width, layers = 50257, 1024, 768, 12
    shapes: list[tuple[str, tuple[int, ...]]] = [("wte", (d(vocab), d(width))), ("wpe", (d(context), d(width)))]
    for layer in range(layers):
        p = f"h.{layer}."
        shapes += [
            (p + "ln_1.weight", (d(width),)),
            (p + "ln_1.bias", (d(width),)),
            (p + "attn.c_attn.weight", (d(width), d(3 * width))),
            (p + "attn.c_attn.bias", (d(3 * width),)),
            (p + "attn.c_proj.weight", (d(width), d(width))),
            (p + "attn.c_proj.bias", (d(width),)),
            (p + "ln_2.weight", (d(width),)),
            (p + "ln_2.bias", (d(width),)),
            (p + "mlp.c_fc.weight", (d(width), d(4 * width))),
            (p + "mlp.c_fc.bias", (d(4 * width),)),
            (p + "mlp.c_proj.weight", (d(4 * width), d(width))),
            (p + "mlp.c_proj.bias", (d(width),)),
        ]
    shapes += [("ln_f.weight", (d(width),)), ("ln_f.bias", (d(width),))]
    return shapes


GPT2_SMALL_SHAPES = gpt2_small_shapes(1)


# ---------------------------------------------------------------- variants


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


@dataclass
class _Torch:
    """torch, when installed (and, for a GPU run, built with CUDA), with what its mixed-dtype add does."""

    module: Any
    mixed_path: str = ""
    gomp_spincount: str = ""


# PyTorch's bundled libgomp keeps each worker spinning for GOMP_SPINCOUNT = 300000
# iterations (~3.5 ms here: pause is ~11 ns) after every parallel op. Timed
# interleaved in one process, that spinning worker holds the core the native
# kernels' helper needs, and add_scale right after a torch op runs on one thread
# (2^24 elements: ~41 GB/s instead of ~55; 2^18: 47-67 instead of ~190). The native
# helpers spin 50 us; 5000 iterations (~57 us) give torch's workers the same idle
# spin, so neither pool holds cores the other needs. Torch's own figures move by
# 0-8% with it (2^18: 171-189 GB/s vs 177-186 by default; 2^24: 48-52 vs 50-53);
# 1000 iterations would be too short and slow torch down (2^18: 29-200 GB/s).
TORCH_GOMP_SPINCOUNT = "5000"


def _import_torch(device: str, match_spin: bool = True) -> _Torch | None:
    """torch, with its OpenMP workers' idle spin matched to the native pool's when torch
    is first imported here (libgomp reads GOMP_SPINCOUNT once, when it loads)."""
    saved = os.environ.get("GOMP_SPINCOUNT")
    policy = os.environ.get("OMP_WAIT_POLICY")
    if "torch" in sys.modules:
        spin = "unknown: torch was imported before the benchmark"
    elif saved is not None or policy is not None:
        spin = f"the user's: GOMP_SPINCOUNT={saved}, OMP_WAIT_POLICY={policy}"
    elif match_spin and device == "cpu":
        os.environ["GOMP_SPINCOUNT"] = TORCH_GOMP_SPINCOUNT
        spin = TORCH_GOMP_SPINCOUNT
    else:
        spin = "libgomp's default (300000)"
    try:
        import torch
    except ImportError:
        return None
    finally:
        # libgomp has read it by now; child processes get the user's environment back
        if saved is None:
            os.environ.pop("GOMP_SPINCOUNT", None)
    if device == "cuda" and not torch.cuda.is_available():
        return None
    return _Torch(torch, _torch_mixed_path(torch, "cuda" if device == "cuda" else "cpu"), spin)


def _torch_mixed_path(torch: Any, device: str) -> str:
    """Whether this PyTorch accepts a bf16 gradient list added into fp32 accumulators by foreach.

    Its foreach kernels need one dtype per list pair and fall back (or refuse) on
    mixed dtypes; a user whose foreach call fails writes the per-tensor loop.
    """
    accs = [torch.zeros(8, dtype=torch.float32, device=device)]
    gs = [torch.ones(8, dtype=torch.bfloat16, device=device)]
    try:
        torch._foreach_add_(accs, gs, alpha=0.5)
    except (RuntimeError, TypeError):
        return "per-tensor"
    return "foreach" if bool((accs[0] == 0.5).all()) else "per-tensor"


class _Xp:
    """What differs between a host (NumPy) and a CUDA (CuPy) run: arrays, timing, torch wrapping."""

    def __init__(self, device: str, torch: _Torch | None) -> None:
        self.device = device
        self.torch = torch
        if device == "cuda":
            import cupy

            self.xp: Any = cupy
        else:
            self.xp = np

    # arrays -----------------------------------------------------------
    def empty(self, n: int, dtype: Any) -> Any:
        """A flat array whose data starts on a 64-byte boundary (as GradArena's buffers do)."""
        dtype = np.dtype(dtype)
        if self.xp is np:
            raw = np.empty(n * dtype.itemsize + 64, dtype=np.uint8)
            start = (-raw.ctypes.data) % 64
            return raw[start : start + n * dtype.itemsize].view(dtype)
        return self.xp.empty(n, dtype=dtype)  # CUDA allocations are 256-byte aligned

    def random(self, n: int, seed: int) -> Any:
        out = self.empty(n, np.float32)
        values = np.random.default_rng(seed).random(n, dtype=np.float32)
        if self.xp is np:
            out[...] = values
        else:
            out.set(values)
        return out

    def address(self, x: Any) -> int:
        return int(x.ctypes.data) if self.xp is np else int(x.data.ptr)

    def to_bfloat16(self, x: Any) -> Any | None:
        """x rounded to bfloat16 (ml_dtypes), or None where the array library has no bfloat16."""
        try:
            out = self.empty(x.size, BFLOAT16)
        except Exception:  # CuPy before bfloat16 support raises its own error types
            return None
        host = np.asarray(x if self.xp is np else x.get()).astype(BFLOAT16)
        if self.xp is np:
            out[...] = host.reshape(out.shape)
        else:
            out.set(host.reshape(out.shape))
        return out

    def synchronize(self) -> None:
        if self.xp is not np:
            self.xp.cuda.get_current_stream().synchronize()

    def timer(self) -> Callable[[Callable[[], Any]], float] | None:
        """CUDA events around a sample on a GPU (wall clock would time the launch, not the kernel)."""
        if self.xp is np:
            return None
        cupy = self.xp

        def cuda_events(fn: Callable[[], Any]) -> float:
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(cupy.cuda.get_elapsed_time(start, end)) / 1e3

        return cuda_events

    # torch views of the same memory -------------------------------------
    def as_torch(self, x: Any) -> Any:
        torch = self.torch.module  # type: ignore[union-attr]
        if x.dtype == BFLOAT16:
            # neither torch.from_numpy nor DLPack knows ml_dtypes' bfloat16: wrap the bits
            return self.as_torch(x.view(np.int16)).view(torch.bfloat16)
        if self.xp is np:
            return torch.from_numpy(x)
        return torch.from_dlpack(x)


def _accumulate_variants(xp: _Xp, acc: Any, g: Any, g16: Any | None, comp: Any, copy_out: Any) -> list[Variant]:
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


def _array_library_variants(
    xp: _Xp, acc: Any, g: Any, tmp: Any, per_tensor: bool, pairs: list[tuple[Any, Any, Any]] | None = None
) -> list[Variant]:
    """What a NumPy (or CuPy) user writes: ``acc += s*g``, and the two-op form with ``out=``."""
    s = SCALE
    lib = "NumPy" if xp.xp is np else "CuPy"
    ops = xp.xp
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


def _torch_variants(
    xp: _Xp, accs: list[Any], gs: list[Any], g16s: list[Any] | None, acc_flat: Any, g_flat: Any
) -> list[Variant]:
    if xp.torch is None:
        return []
    torch = xp.torch.module
    s = SCALE
    taccs = [xp.as_torch(a) for a in accs]
    tgs = [xp.as_torch(g) for g in gs]
    tacc, tg = xp.as_torch(acc_flat), xp.as_torch(g_flat)
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
        tg16s = [xp.as_torch(g) for g in g16s]
        if xp.torch.mixed_path == "foreach":
            mixed: Callable[[], Any] = lambda: torch._foreach_add_(taccs, tg16s, alpha=s)  # noqa: E731
            label = "torch._foreach_add_(accs fp32, gs bf16, alpha=s)"
        else:

            def mixed() -> None:
                for a, b in zip(taccs, tg16s, strict=True):
                    a.add_(b, alpha=s)

            label = "torch acc.add_(g bf16, alpha=s) per tensor"
        variants.append(Variant("torch_mixed", label, 10, mixed, note=f"PyTorch mixed path: {xp.torch.mixed_path}"))
    return variants


def _limit_variants(xp: _Xp, dst: Any, b: Any, c: Any) -> list[Variant]:
    """Copy (dst = c) and triad (dst = b + s*c): the bandwidth this machine shows in the same run."""
    s = SCALE
    ops = xp.xp
    lib = "NumPy" if ops is np else "CuPy"
    variants = [
        Variant("copy_array_library", f"{lib} copyto", 8, lambda: ops.copyto(dst, c), role="copy",
                extra_bus_bytes=4),
        Variant("copy_native", "copy_scale with s=1", 8, lambda: K.copy_scale(dst, c, 1.0), role="copy",
                extra_bus_bytes=4),
    ]
    if ops is np:

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
    if xp.torch is not None:
        torch = xp.torch.module
        tdst, tb, tc = xp.as_torch(dst), xp.as_torch(b), xp.as_torch(c)
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


# ---------------------------------------------------------------- cases


def _flat_case(xp: _Xp, n: int) -> tuple[list[Variant], dict[str, Any]]:
    acc, comp = xp.empty(n, np.float32), xp.empty(n, np.float32)
    acc[...] = 0
    comp[...] = 0
    g = xp.random(n, seed=n)
    tmp, dst = xp.empty(n, np.float32), xp.empty(n, np.float32)
    dst[...] = 0
    g16 = xp.to_bfloat16(g)
    variants = _array_library_variants(xp, acc, g, tmp, per_tensor=False)
    variants += _accumulate_variants(xp, acc, g, g16, comp, dst)
    variants += _torch_variants(xp, [acc], [g], None if g16 is None else [g16], acc, g)
    variants += _limit_variants(xp, dst, acc, g)
    return variants, {"case": f"2^{int(math.log2(n))}" if n & (n - 1) == 0 else str(n), "elements": n, "tensors": 1}


def _model_case(xp: _Xp, divisor: int) -> tuple[list[Variant], dict[str, Any]]:
    """The model-shaped list in a real GradArena (gradients in a twin arena of the same layout)."""
    from minitorch_accum.accum import GradArena
    from minitorch_accum.nn import Param

    shapes = gpt2_small_shapes(divisor)
    # Parameter values are never read: empty arrays cost no memory until touched.
    params = [(name, Param(xp.xp.empty(shape, dtype=np.float32))) for name, shape in shapes]
    arena = GradArena(params, "float32")
    grads, comps = arena.like(), arena.like()
    acc_flat, g_flat, comp_flat = arena.buffer, grads.buffer, comps.buffer
    g_flat[...] = xp.random(int(g_flat.size), seed=1)
    accs = [arena.view(p) for _, p in params]
    gs = [grads.view(p) for _, p in params]
    g16_flat = xp.to_bfloat16(g_flat)
    g16s = None
    if g16_flat is not None:
        base = xp.address(g_flat)
        g16s = []
        for g in gs:
            offset = (xp.address(g) - base) // 4
            g16s.append(g16_flat[offset : offset + g.size].reshape(g.shape))
    tmps = [xp.xp.empty(g.shape, dtype=np.float32) for g in gs]
    dst = xp.empty(int(acc_flat.size), np.float32)
    dst[...] = 0
    s = SCALE

    def per_tensor() -> None:
        for a, b in zip(accs, gs, strict=True):
            K.add_scale(a, b, s)

    variants = _array_library_variants(
        xp, acc_flat, g_flat, None, per_tensor=True, pairs=list(zip(accs, gs, tmps, strict=True))
    )
    variants += [
        Variant("native_per_tensor", "add_scale on each tensor", 12, per_tensor),
        Variant("native_multi", "multi_add_scale over the list", 12, lambda: K.multi_add_scale(accs, gs, s)),
    ]
    variants += _accumulate_variants(xp, acc_flat, g_flat, g16_flat, comp_flat, dst)
    if g16s is not None:
        variants.append(
            Variant(
                "native_multi_cast_add_scale",
                "multi_cast_add_scale bf16 -> fp32 over the list",
                10,
                lambda: K.multi_cast_add_scale(accs, g16s, s),
            )
        )
    variants += _torch_variants(xp, accs, gs, g16s, acc_flat, g_flat)
    variants += _limit_variants(xp, dst, acc_flat, g_flat)
    elements = sum(math.prod(shape) for _, shape in shapes)
    scale_text = "GPT-2 small shapes" if divisor == 1 else f"GPT-2 small shapes, every dimension / {divisor}"
    return variants, {
        "case": "model",
        "elements": elements,
        "tensors": len(shapes),
        "arena_elements": int(acc_flat.size),
        "model_divisor": divisor,
        "description": scale_text,
    }


def _measure(
    xp: _Xp, variants: list[Variant], info: dict[str, Any], repeats: int, warmup: int, min_sample_bytes: int
) -> dict[str, Any]:
    elements = int(info["elements"])
    # one loop count for every variant of a case, so all see the same cache state per sample
    inner = max(1, math.ceil(min_sample_bytes / (12 * elements)))

    def looped(fn: Callable[[], Any]) -> Callable[[], Any]:
        if inner == 1:
            return fn

        def run() -> None:
            for _ in range(inner):
                fn()

        return run

    samples = time_interleaved(
        {v.name: looped(v.run) for v in variants},
        repeats=repeats,
        warmup=warmup,
        sync=xp.synchronize if xp.xp is not np else None,
        timer=xp.timer(),
    )
    figures: dict[str, Any] = {}
    for v in variants:
        per_call = [t / inner for t in samples[v.name]]
        seconds = median(per_call)
        figures[v.name] = {
            "label": v.label,
            "role": v.role,
            "bytes_per_element": v.bytes_per_element,
            "median_s": seconds,
            "gb_per_s": v.bytes_per_element * elements / seconds / 1e9,
            "bus_bytes_per_element": v.bytes_per_element + (v.extra_bus_bytes if xp.xp is np else 0),
            "bus_gb_per_s": (v.bytes_per_element + (v.extra_bus_bytes if xp.xp is np else 0)) * elements
            / seconds / 1e9,
            "samples_s": per_call,
        }
        if v.note:
            figures[v.name]["note"] = v.note
    best = {
        role: max(
            ((n, f["bus_gb_per_s"]) for n, f in figures.items() if f["role"] == role),
            key=lambda item: item[1],
            default=(None, math.nan),
        )
        for role in ("copy", "triad")
    }
    limit = max(best["copy"][1], best["triad"][1])
    for f in figures.values():
        f["fraction_of_copy"] = f["bus_gb_per_s"] / best["copy"][1]
        f["fraction_of_triad"] = f["bus_gb_per_s"] / best["triad"][1] if best["triad"][0] else None
        f["fraction_of_limit"] = f["bus_gb_per_s"] / limit
    case = dict(info)
    case.update(
        inner_calls_per_sample=inner,
        repeats=repeats,
        warmup=warmup,
        variants=figures,
        limit={
            "copy_variant": best["copy"][0],
            "copy_gb_per_s": best["copy"][1],
            "triad_variant": best["triad"][0],
            "triad_gb_per_s": best["triad"][1] if best["triad"][0] else None,
            "gb_per_s": limit,
        },
        ratios=_ratios(figures),
    )
    return case


def _ratio(figures: dict[str, Any], slow: str, fast: str) -> float | None:
    """How many times faster ``fast`` ran than ``slow`` (a ratio of medians from one run)."""
    if slow not in figures or fast not in figures:
        return None
    return figures[slow]["median_s"] / figures[fast]["median_s"]


def _ratios(figures: dict[str, Any]) -> dict[str, float | None]:
    ratios = {
        "arena_vs_numpy_naive": _ratio(figures, "numpy_naive", "native_arena"),
        "arena_vs_numpy_out": _ratio(figures, "numpy_out", "native_arena"),
        "arena_vs_torch_foreach": _ratio(figures, "torch_foreach", "native_arena"),
        "arena_vs_torch_flat": _ratio(figures, "torch_flat", "native_arena"),
        "cast_add_scale_vs_torch_mixed": _ratio(figures, "torch_mixed", "native_cast_add_scale"),
        "multi_vs_per_tensor": _ratio(figures, "native_per_tensor", "native_multi"),
        "multi_vs_torch_foreach": _ratio(figures, "torch_foreach", "native_multi"),
        "multi_cast_add_scale_vs_torch_mixed": _ratio(figures, "torch_mixed", "native_multi_cast_add_scale"),
        "arena_fraction_of_limit": figures["native_arena"]["fraction_of_limit"] if "native_arena" in figures else None,
    }
    return {name: value for name, value in ratios.items() if value is not None}


# ---------------------------------------------------------------- targets


def _target(name: str, case: dict[str, Any], key: str, threshold: float) -> dict[str, Any]:
    measured = case["ratios"].get(key)
    return {
        "target": name,
        "case": case["case"],
        "elements": case["elements"],
        "threshold": threshold,
        "measured": measured,
        "met": None if measured is None else bool(measured >= threshold),
    }


def _targets(device: str, cases: list[dict[str, Any]], min_elements: int | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if device == "cpu":
        smallest = CPU_TARGET_MIN_ELEMENTS if min_elements is None else min_elements
        for case in cases:
            if case["elements"] < smallest:
                continue
            rows += [
                _target(
                    f"arena add_scale >= {CPU_VS_NUMPY}x NumPy acc += s*g", case, "arena_vs_numpy_naive", CPU_VS_NUMPY
                ),
                _target(
                    f"arena add_scale >= {CPU_VS_TORCH_FOREACH}x torch._foreach_add_",
                    case,
                    "arena_vs_torch_foreach",
                    CPU_VS_TORCH_FOREACH,
                ),
                _target(
                    f"arena add_scale >= {CPU_FRACTION_OF_LIMIT:.0%} of measured copy/triad bandwidth",
                    case,
                    "arena_fraction_of_limit",
                    CPU_FRACTION_OF_LIMIT,
                ),
                _target(
                    f"cast_add_scale (bf16 into fp32) >= {CPU_CAST_VS_TORCH_MIXED}x PyTorch mixed-dtype path",
                    case,
                    "cast_add_scale_vs_torch_mixed",
                    CPU_CAST_VS_TORCH_MIXED,
                ),
            ]
    else:
        smallest = GPU_TARGET_MIN_ELEMENTS if min_elements is None else min_elements
        for case in cases:
            if case["case"] != "model" and case["elements"] >= smallest:
                row = _target(
                    f"arena add_scale >= {GPU_FRACTION_OF_COPY:.0%} of measured D2D copy bandwidth",
                    case,
                    "arena_fraction_of_copy",
                    GPU_FRACTION_OF_COPY,
                )
                rows.append(row)
            if case["case"] == "model":
                rows.append(
                    _target(
                        f"model-shaped multi_add_scale >= {GPU_MULTI_VS_TORCH_FOREACH}x torch._foreach_add_ (CUDA)",
                        case,
                        "multi_vs_torch_foreach",
                        GPU_MULTI_VS_TORCH_FOREACH,
                    )
                )
    return rows


# ---------------------------------------------------------------- run


def run_kernels(
    settings: Settings, out: str | os.PathLike | None = None, log: Log | None = print, plot: bool = True
) -> dict[str, Any]:
    """Measure every case of ``settings``; write the JSON (and PNG); return the payload.

    The payload's ``json_path`` and ``png_path`` say where the files went.
    """
    say: Log = log if log is not None else (lambda _text: None)
    if settings.device == "cuda":
        from minitorch_accum import cuda_available

        if not cuda_available():
            raise RuntimeError("--device cuda: no CUDA device is usable here (CuPy missing or no GPU)")
    elif settings.device != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {settings.device!r}")
    started = time.perf_counter()
    torch = _import_torch(settings.device, settings.match_torch_spin)
    xp = _Xp(settings.device, torch)
    cases: list[dict[str, Any]] = []
    jobs: list[tuple[str, Callable[[], tuple[list[Variant], dict[str, Any]]], int]] = [
        (
            f"n = 2^{int(math.log2(n))}" if n & (n - 1) == 0 else f"n = {n}",
            (lambda n=n: _flat_case(xp, n)),
            settings.repeats_for(n),
        )
        for n in settings.sizes
    ]
    jobs.append(("model-shaped list", lambda: _model_case(xp, settings.model_divisor), settings.model_repeats))
    for title, build, repeats in jobs:
        case_started = time.perf_counter()
        variants, info = build()
        case = _measure(xp, variants, info, repeats, settings.warmup, settings.min_sample_bytes)
        del variants  # the case's arrays go before the next, larger one is allocated
        if xp.xp is not np:
            xp.xp.get_default_memory_pool().free_all_blocks()
        if settings.device == "cuda":
            # the GPU target's limit is the D2D copy itself (CuPy copyto or cudaMemcpy)
            d2d = max(case["variants"][name]["gb_per_s"] for name in ("copy_array_library", "copy_memcpy"))
            case["limit"]["d2d_copy_gb_per_s"] = d2d
            case["ratios"]["arena_fraction_of_copy"] = case["variants"]["native_arena"]["gb_per_s"] / d2d
        cases.append(case)
        say(
            f"  {title:<18} {len(case['variants']):>2} variants x {repeats} rounds "
            f"(x{case['inner_calls_per_sample']} calls/sample)  {time.perf_counter() - case_started:6.1f} s"
        )
    payload: dict[str, Any] = {
        "benchmark": BENCHMARK,
        "machine": machine_info(),
        "settings": _settings_record(settings, torch),
        "cases": cases,
        "targets": _targets(settings.device, cases, settings.target_min_elements),
        "seconds": time.perf_counter() - started,
    }
    payload["all_targets_met"] = all(t["met"] for t in payload["targets"] if t["met"] is not None)
    path = write_results(BENCHMARK, payload, results_dir(out))
    payload["json_path"] = str(path)
    if plot:
        machine = path.stem.rsplit("-", 1)[-1]
        png = path.with_name(f"{BENCHMARK}-latest-{machine}.png")
        _plot(payload, png)
        payload["png_path"] = str(png)
    return payload


def _settings_record(settings: Settings, torch: _Torch | None) -> dict[str, Any]:
    record = asdict(settings)
    record["sizes"] = list(settings.sizes)
    record["notes"] = list(settings.notes)
    record["scale"] = SCALE
    record["bytes_convention"] = (
        "GB/s = useful bytes per element x elements / median seconds; useful bytes: add_scale 12, copy_scale 8, "
        "cast_add_scale (bf16 g) 10, compensated 20, copy 8, triad 12; NumPy acc += s*g and the out= form are "
        "charged 12 for comparability. The limit and every 'fraction' use bus bytes instead, what the memory bus "
        "really moves on a CPU: a store to a line never read first costs a write-allocate read (copy 12 B/elem, "
        "one-pass triad 16, copy_scale 12; add_scale 12, since it reads acc anyway), a two-pass triad 24. The "
        "limit is the best copy or triad of the same case in bus GB/s (on a GPU: the D2D copy, useful bytes)."
    )
    record["size_sweep_note"] = (
        "each size is one flat buffer, so per-tensor, multi-tensor and arena coincide there (timed as "
        "native_arena); torch_foreach is a one-tensor list. The model case times them separately."
    )
    record["threads"] = {
        "cpu_count": os.cpu_count(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MTA_NUM_THREADS": os.environ.get("MTA_NUM_THREADS"),
        "native": "its own pool (caller + helpers, all CPUs unless MTA_NUM_THREADS/OMP_NUM_THREADS) from 2^15 elements",
        "native_simd": _native_simd(),
        "numpy": "one thread (ufuncs)",
        "torch": torch.module.get_num_threads() if torch is not None else None,
    }
    record["torch"] = (
        None
        if torch is None
        else {
            "version": torch.module.__version__,
            "mixed_dtype_path": torch.mixed_path,
            "mixed_dtype_call": (
                "torch._foreach_add_(accs_fp32, gs_bf16, alpha=s)"
                if torch.mixed_path == "foreach"
                else "for a, g in zip(accs, gs): a.add_(g, alpha=s)"
            ),
            "gomp_spincount": torch.gomp_spincount,
            "gomp_spincount_note": (
                "GOMP_SPINCOUNT of torch's OpenMP workers during this run: their idle spin matched to the native "
                "pool's (~50 us) so neither pool's spinning threads hold the cores the other needs; with libgomp's "
                "default (~3.5 ms of spinning after each torch op) the native helper is starved right after a torch "
                "variant and add_scale runs on one thread"
            ),
        }
    )
    record["kernel_path"] = K.kernel_path()
    return record


# ---------------------------------------------------------------- output


def _native_simd() -> dict[str, Any]:
    """Which vector loops the native kernels run: the widest of AVX-512 / AVX2 / SSE2 the CPU has
    (csrc/native/simd.h), unless MTA_SIMD caps it."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    avx512 = {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= flags
    level = "avx512" if avx512 else "avx2" if "avx2" in flags else "baseline" if flags else "unknown"
    cap = os.environ.get("MTA_SIMD")
    if cap == "baseline" or (cap == "avx2" and level == "avx512"):
        level = cap
    return {"level": level, "MTA_SIMD": cap}


def _plot(payload: dict[str, Any], path: Path) -> None:
    """GB/s against elements per variant (log x), the copy/triad limits as horizontal lines, and
    the model-shaped case as bars."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state, nothing shown

    sweep = [c for c in payload["cases"] if c["case"] != "model"]
    model = next((c for c in payload["cases"] if c["case"] == "model"), None)
    fig = Figure(figsize=(15, 6.5), layout="constrained")
    ax, bars = fig.subplots(1, 2, width_ratios=[1.6, 1])
    if sweep:
        names = list(sweep[-1]["variants"])
        x = [c["elements"] for c in sweep]
        for name in names:
            info = sweep[-1]["variants"][name]
            y = [c["variants"][name]["gb_per_s"] if name in c["variants"] else math.nan for c in sweep]
            style = "--" if info["role"] != "accumulate" else "-"
            ax.plot(
                x,
                y,
                style,
                marker="o",
                markersize=3,
                label=info["label"],
                linewidth=2.5 if name == "native_arena" else 1.2,
                alpha=0.6 if style == "--" else 1.0,
            )
        largest = sweep[-1]["limit"]
        ax.axhline(
            largest["copy_gb_per_s"],
            color="black",
            linestyle=":",
            label=f"copy limit at {sweep[-1]['case']}: {largest['copy_gb_per_s']:.1f} GB/s (bus bytes)",
        )
        if largest["triad_gb_per_s"]:
            ax.axhline(
                largest["triad_gb_per_s"],
                color="gray",
                linestyle="-.",
                label=f"triad limit at {sweep[-1]['case']}: {largest['triad_gb_per_s']:.1f} GB/s (bus bytes)",
            )
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements per buffer")
        ax.set_ylabel("GB/s (useful bytes)")
        ax.set_title(
            f"accumulation kernels, {payload['settings']['device']}: "
            f"{payload['machine'].get('gpu') or payload['machine']['cpu']}"
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    if model is not None:
        items = list(model["variants"].items())
        bars.barh(
            [f["label"] for _, f in items],
            [f["gb_per_s"] for _, f in items],
            color=[
                "tab:orange" if n == "native_arena" else "tab:gray" if f["role"] != "accumulate" else "tab:blue"
                for n, f in items
            ],
        )
        bars.axvline(model["limit"]["gb_per_s"], color="black", linestyle=":", label="limit (best copy/triad)")
        bars.set_xlabel("GB/s (useful bytes)")
        bars.set_title(
            f"model-shaped: {model['tensors']} tensors, {model['elements'] / 1e6:.1f}M elements"
            + ("" if model["model_divisor"] == 1 else f" (dims / {model['model_divisor']})")
        )
        bars.tick_params(axis="y", labelsize=7)
        bars.invert_yaxis()
        bars.legend(fontsize=7)
    fig.savefig(path, dpi=110)


def _format_ratio(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.0%}" if percent else f"{value:.2f}x"


def format_table(payload: dict[str, Any]) -> str:
    """The readable summary: GB/s per variant and case, the ratios, and the targets."""
    cases = payload["cases"]
    names: list[str] = []
    for case in cases:
        names += [n for n in case["variants"] if n not in names]
    head = ["variant", "B/el"] + [c["case"] for c in cases]
    rows = []
    for name in names:
        info = next(c["variants"][name] for c in cases if name in c["variants"])
        cells = []
        for case in cases:
            f = case["variants"].get(name)
            cells.append("-" if f is None else f"{f['gb_per_s']:.1f} ({f['fraction_of_limit']:.0%})")
        rows.append([name, str(info["bytes_per_element"])] + cells)
    lines = ["GB/s from useful bytes (percent of the case's best copy/triad, both in bus bytes)"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)) for r in rows]
    lines.append("")
    lines.append("median seconds per call")
    for case in cases:
        parts = ", ".join(f"{n} {f['median_s']:.3g}" for n, f in case["variants"].items())
        lines.append(f"  {case['case']}: {parts}")
    lines.append("")
    lines.append("ratios (x = times faster, measured side by side)")
    ratio_names: list[str] = []
    for case in cases:
        ratio_names += [n for n in case["ratios"] if n not in ratio_names]
    rhead = ["ratio"] + [c["case"] for c in cases]
    rrows = [[r] + [_format_ratio(c["ratios"].get(r), percent="fraction" in r) for c in cases] for r in ratio_names]
    rw = [max(len(r[i]) for r in [rhead, *rrows]) for i in range(len(rhead))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(rhead, rw, strict=True)))
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, rw, strict=True)) for r in rrows]
    lines.append("")
    torch = payload["settings"].get("torch")
    if torch:
        lines.append(f"PyTorch {torch['version']} mixed bf16 -> fp32 path that ran: {torch['mixed_dtype_call']}")
        lines.append(f"PyTorch OpenMP idle spin (GOMP_SPINCOUNT) during the run: {torch['gomp_spincount']}")
    lines.append("targets")
    for t in payload["targets"]:
        pct = "fraction" in t["target"] or "%" in t["target"]
        verdict = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        lines.append(f"  [{verdict:>6}] {t['case']:>6}: {t['target']}: measured {_format_ratio(t['measured'], pct)}")
    if not payload["targets"]:
        lines.append("  (no case large enough for the targets in this run)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m minitorch_accum.bench.kernels`` / ``maccum bench kernels``."""
    parser = argparse.ArgumentParser(
        prog="python -m minitorch_accum.bench.kernels",
        description="Fused accumulation kernels against NumPy, PyTorch and the measured memory bandwidth.",
    )
    parser.add_argument("--quick", action="store_true", help="a few sizes, fewer rounds, model shapes / 8")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", default=None, help="results directory (default benchmarks/results)")
    parser.add_argument("--repeats", type=int, default=None, help="rounds per case (overrides the mode's)")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        from minitorch_accum import cuda_available

        if not cuda_available():
            print("bench kernels: --device cuda needs CuPy and a CUDA device; none is usable here", file=sys.stderr)
            return 2
    settings = quick_settings(args.device) if args.quick else full_settings(args.device)
    if args.repeats is not None:
        settings = replace(settings, repeats=args.repeats, small_repeats=args.repeats, model_repeats=args.repeats)
    print(
        f"bench kernels: {'quick' if settings.quick else 'full'} mode on {args.device}, "
        f"{len(settings.sizes)} sizes + model-shaped list"
    )
    payload = run_kernels(settings, out=args.out, log=print)
    print()
    print(format_table(payload))
    print()
    print(f"wrote {payload['json_path']}" + (f" and {payload['png_path']}" if "png_path" in payload else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

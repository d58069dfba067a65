"""What one kernel-benchmark run measures: sizes, rounds, sample length; the full (recorded)
and quick modes; and the record of the run's settings written into the result file."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.harness.machine import native_simd
from benchmarks.harness.torch_import import ImportedTorch
from minitorch_accum import kernels as K

__all__ = ["SCALE", "Settings", "full_settings", "quick_settings", "settings_record"]

SCALE = 0.1  # 1/k for a window of k = 10 micro-batches: not a power of two, so the multiply rounds


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
    # give torch's OpenMP workers the native pool's idle spin (see harness/torch_import.py)
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


def settings_record(settings: Settings, torch: ImportedTorch | None, mixed_path: str) -> dict[str, Any]:
    """The settings as the result file holds them, with the conventions and thread pools that
    shaped the figures; ``mixed_path`` is PyTorch's bf16 -> fp32 path ("foreach" or "per-tensor")."""
    record = asdict(settings)
    record["sizes"] = list(settings.sizes)
    record["notes"] = list(settings.notes)
    record["scale"] = SCALE
    record["bytes_convention"] = (
        "GB/s = useful bytes per element x elements / median seconds; useful bytes: add_scale 12, copy_scale 8, "
        "cast_add_scale (bf16 g) 10, compensated 20, copy 8, triad 12; into a bf16 acc: add_scale and "
        "add_scale_stochastic 8, copy_scale_stochastic and cast_add_scale_stochastic 6; NumPy acc += s*g and the "
        "out= form are charged 12 for comparability. The limit and every 'fraction' use bus bytes instead, what the "
        "memory bus really moves on a CPU: a store to a line never read first costs a write-allocate read (copy 12 "
        "B/elem, one-pass triad 16, copy_scale 12, copy_scale_stochastic 8; add_scale 12, since it reads acc "
        "anyway), a two-pass triad 24. The "
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
        "native_simd": native_simd(),
        "numpy": "one thread (ufuncs)",
        "torch": torch.module.get_num_threads() if torch is not None else None,
    }
    record["torch"] = (
        None
        if torch is None
        else {
            "version": torch.module.__version__,
            "mixed_dtype_path": mixed_path,
            "mixed_dtype_call": (
                "torch._foreach_add_(accs_fp32, gs_bf16, alpha=s)"
                if mixed_path == "foreach"
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
    # which implementation the library's kernels took (each variant's figure says so too)
    record["kernel_path"] = K.kernel_path() if settings.device == "cpu" else "cupy"
    return record

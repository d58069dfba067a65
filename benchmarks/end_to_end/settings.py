"""What one end-to-end run depends on (recorded in the result file): the models, the window
lengths k, the micro-batch, the fusion modes; the full (recorded) and quick modes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from benchmarks.end_to_end.cases import CHARS, DIGITS, WIDE, ModelCase

__all__ = ["Settings", "full_settings", "quick_settings", "settings_record"]


@dataclass(frozen=True)
class Settings:
    """Everything a run depends on; recorded in the result file."""

    mode: str
    models: tuple[ModelCase, ...]
    ks: tuple[int, ...]
    micro_batch: int = 32
    fusions: tuple[str, ...] = ("none", "leaf", "gemm")
    memory_fusions: tuple[str, ...] = ("gemm", "leaf")
    device: str = "cpu"
    compare_torch: bool = True
    trace_windows: int = 2
    lr: float = 1e-3
    momentum: float = 0.9
    seed: int = 0
    target_model: str = "wide_mlp"
    plot: bool = True
    # BLAS/OpenMP threads for the run (None: as configured). On a machine where another
    # process holds a core, a two-thread BLAS waits a scheduler tick at every barrier
    threads: int | None = None


def full_settings(device: str = "cpu") -> Settings:
    """Every k of the issue; about 4 minutes on two idle cores, under 10 on a busy machine."""
    return Settings(mode="full", models=(DIGITS, WIDE, CHARS), ks=(1, 2, 4, 8, 16), trace_windows=2, device=device)


def quick_settings(device: str = "cpu") -> Settings:
    """Under two minutes on two cores: k in {1, 8}, few repeats of the wide model."""
    return Settings(mode="quick", models=(replace(DIGITS, repeats=31, warmup=3), replace(WIDE, repeats=3, warmup=1),
                                          replace(CHARS, repeats=3, warmup=1)),
                    ks=(1, 8), trace_windows=1, device=device)


def settings_record(settings: Settings) -> dict[str, Any]:
    data = asdict(settings)
    data["models"] = [asdict(m) | m.describe() for m in settings.models]
    return data

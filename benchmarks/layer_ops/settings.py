"""What one op-level run measures: the shapes (the char transformer's: 32 sequences of 32
characters, n_embd 64, hidden 256, a 65-character vocabulary; and GPT-2-small's GEMMs),
threads, rounds; the full (recorded) and quick modes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TARGET_RATIO", "Settings", "full_settings", "quick_settings"]

#: ours / PyTorch, forward + backward, for GELU, LayerNorm and cross entropy (issue 19)
TARGET_RATIO = 1.2


@dataclass(frozen=True)
class Settings:
    device: str = "cpu"
    threads: int = 1  # BLAS (threadpoolctl), PyTorch and the native pool alike
    rows: int = 1024  # items of a micro-batch: 32 sequences x 32 positions
    embd: int = 64
    hidden: int = 256
    vocab: int = 65
    # (K, M, N) of the weight-gradient GEMMs out(M, N) += a(K, M)^T g(K, N)
    gemm_shapes: tuple[tuple[int, int, int], ...] = (
        (1024, 64, 192), (1024, 64, 256), (1024, 256, 64), (1024, 64, 65),
        (1024, 768, 768), (1024, 768, 3072), (1024, 3072, 768),
    )
    warmup: int = 3
    repeats: int = 41
    gemm_repeats: int = 15
    quick: bool = False
    notes: tuple[str, ...] = ()


def full_settings(device: str = "cpu") -> Settings:
    return Settings(device=device, notes=(
        "every variant of a case timed interleaved (rotating order), medians of 41 rounds (15 for the GEMMs)",
    ))


def quick_settings(device: str = "cpu") -> Settings:
    return Settings(device=device, rows=128, gemm_shapes=((256, 64, 192), (512, 128, 128)), warmup=1, repeats=5,
                    gemm_repeats=3, quick=True,
                    notes=("quick mode: 128 items, two small GEMMs, 3-5 rounds: indicative only",))

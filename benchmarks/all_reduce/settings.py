"""What one all-reduce run depends on (recorded in the result file), full and quick; on one machine
(the ranks share its memory) or, with ``hosts`` > 1, over hosts made as network namespaces on this
machine (``--hosts N``: N hosts, one rank each, TCP over veth links through a bridge)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Settings", "full_settings", "hosts_full_settings", "hosts_quick_settings", "quick_settings",
           "settings_record"]


@dataclass(frozen=True)
class Settings:
    mode: str
    ranks: int = 2
    arena_elements: tuple[int, ...] = (1 << 16, 1 << 20, 1 << 22, 1 << 24)  # float32 gradient arenas
    repeats: int = 9
    rounds: int = 2  # launches of 1 rank and of R ranks, alternately
    # the step-time comparison: an MLP, one global batch of ranks x k x micro_batch items
    dims: tuple[int, ...] = (512, 1024, 1024, 10)
    k: int = 8  # per rank at R ranks; R=1 runs ranks x k micro-batches
    micro_batch: int = 32
    windows: int = 5
    # every rank (and the single process) on one thread: a 2-core machine gives each rank a core,
    # and a two-thread BLAS on a machine where another process holds a core waits at its barriers
    threads_per_rank: int = 1
    device: str = "cpu"
    # 1: every rank on this machine; N > 1: N namespace hosts, ranks spread evenly over them
    hosts: int = 1


def full_settings(device: str = "cpu") -> Settings:
    return Settings(mode="full", device=device)


def quick_settings(device: str = "cpu") -> Settings:
    return Settings(mode="quick", arena_elements=(1 << 14, 1 << 18), repeats=3, dims=(64, 128, 10), k=2,
                    micro_batch=8, windows=2, device=device)


def settings_record(settings: Settings) -> dict[str, Any]:
    return asdict(settings)


def hosts_full_settings(device: str = "cpu") -> Settings:
    """The recorded run over 2 namespace hosts: one rank each, the full arenas and MLP."""
    return Settings(mode="full", device=device, hosts=2)


def hosts_quick_settings(device: str = "cpu") -> Settings:
    return Settings(mode="quick", arena_elements=(1 << 14, 1 << 18), repeats=3, dims=(64, 128, 10), k=2,
                    micro_batch=8, windows=2, device=device, hosts=2)

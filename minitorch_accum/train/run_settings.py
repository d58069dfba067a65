"""The settings a run is made of, recorded in every checkpoint and compared on resume.

Resuming with other settings (k, the micro-batch, the optimizer or its learning rate,
the dataset or dtype of a command-line run) would silently mix two runs: the step
counts, the normalization and ``final.safetensors`` would contradict each other. So each
checkpoint records the settings, and a resume refuses a difference with one line naming
every differing setting, unless the user explicitly allows it (then it says what
changes). A different number of data-parallel ranks is not a difference: the global
batch is what must stay, and k per rank is re-derived to keep it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SettingsMismatchError", "compare_settings", "describe_changes", "rescale_k"]

#: settings that may change on resume without being a different run
RESUMABLE = frozenset({"run.epochs", "run.num_epochs", "run.progress", "run.out", "run.resume", "run.overwrite",
                       "run.checkpoint_every", "run.allow_config_change", "run.device", "run.accum"})


class SettingsMismatchError(ValueError):
    """The run to resume was made with other settings."""


def _flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = list(value) if isinstance(value, tuple) else value
    return flat


def compare_settings(saved: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(setting, saved value, current value) for every setting that differs."""
    old, new = _flatten(saved), _flatten(current)
    return [(name, old.get(name), new.get(name)) for name in sorted(set(old) | set(new))
            if name not in RESUMABLE and old.get(name) != new.get(name)]


def describe_changes(changes: list[tuple[str, Any, Any]]) -> str:
    return ", ".join(f"{name} {old!r} -> {new!r}" for name, old, new in changes)


def rescale_k(saved_k: int, saved_world: int, world: int) -> int:
    """k per rank that keeps the global window (saved_world x saved_k micro-batches) on ``world`` ranks."""
    total = saved_k * saved_world
    if total % world:
        raise SettingsMismatchError(
            f"the checkpoint's window holds {total} micro-batches ({saved_world} rank(s) x k={saved_k}), which "
            f"{world} ranks cannot share equally; resume with a number of ranks that divides {total}")
    return total // world

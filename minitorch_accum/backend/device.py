"""Device names: ``"cpu"``, ``"cuda"`` and ``"cuda:N"``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Device", "DeviceLike", "parse_device"]


@dataclass(frozen=True)
class Device:
    """Where a tensor's data lives. Compares equal to its string form (``Device("cuda", 0) == "cuda:0"``)."""

    kind: str
    index: int = 0

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def __repr__(self) -> str:
        return f"Device({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = parse_device(other)
            except ValueError:
                return False
        if isinstance(other, Device):
            return (self.kind, self.index) == (other.kind, other.index)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.kind, self.index))


DeviceLike = str | Device


def parse_device(device: DeviceLike | None) -> Device:
    """Turn ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a Device into a Device."""
    if device is None:
        return Device("cpu")
    if isinstance(device, Device):
        return device
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda:0', got {device!r}")
    text = device.strip().lower()
    if text == "cpu":
        return Device("cpu")
    if text == "cuda" or text == "gpu":
        return Device("cuda", 0)
    if text.startswith("cuda:"):
        index = text[5:]
        if index.isdigit():
            return Device("cuda", int(index))
    raise ValueError(f"unknown device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")

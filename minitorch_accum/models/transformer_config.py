"""The shape of the character transformer: one value its parts (the blocks, the attention) and
the model are built from."""

from __future__ import annotations

from dataclasses import dataclass

from minitorch_accum.data import DEFAULT_BLOCK_SIZE

__all__ = ["TransformerConfig"]


@dataclass(frozen=True)
class TransformerConfig:
    """The shape of the character transformer. The defaults keep one epoch of the shipped
    text on two CPU cores to seconds while every micro-batch still holds megabytes of
    activations (batch x block x layers), which is what accumulation saves."""

    vocab_size: int
    block_size: int = DEFAULT_BLOCK_SIZE
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"TransformerConfig: n_embd {self.n_embd} is not a multiple of n_head {self.n_head}")

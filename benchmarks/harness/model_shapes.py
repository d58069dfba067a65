"""Parameter shapes of a real model, for benchmarks that lay gradients out in a ``GradArena``
(the kernels' model-shaped case; an all-reduce of the arena would use the same list)."""

from __future__ import annotations

__all__ = ["GPT2_SMALL_SHAPES", "gpt2_small_shapes"]


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

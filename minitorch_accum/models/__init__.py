"""Reference models, built from nn alone: the MLP of the digits task, a per-position MLP over
characters, and a nanoGPT-shaped character transformer with a tied head. The ``maccum``
tasks, the benchmarks and the tests use them; one file each."""

from minitorch_accum.models.causal_self_attention import CausalSelfAttention
from minitorch_accum.models.char_mlp import CharMLP
from minitorch_accum.models.char_transformer import CharTransformer
from minitorch_accum.models.digits_mlp import DIGITS_MLP_VARIANTS, digits_mlp
from minitorch_accum.models.transformer_block import TransformerBlock
from minitorch_accum.models.transformer_config import TransformerConfig

__all__ = ["DIGITS_MLP_VARIANTS", "CausalSelfAttention",
           "CharMLP", "CharTransformer", "TransformerBlock", "TransformerConfig", "digits_mlp"]

"""Training the character transformer with a float32, a bfloat16 round-to-nearest and a bfloat16
stochastically rounded gradient arena (issue 29): ``python benchmarks/bf16_arena.py``."""

"""The models the end-to-end benchmark trains: what is built, on which data, with which loss,
and the same model in PyTorch. The measurement only calls the ``ModelCase`` methods, so a
new model is one more class here and one more settings entry: MLPs (``ModelSpec``) and the
character transformer of ``maccum train --dataset chars`` (``TransformerCase``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from minitorch_accum import Tensor, nn
from minitorch_accum.nn import functional as F

__all__ = ["CHARS", "DIGITS", "NANOGPT_CPU", "WIDE", "ModelCase", "ModelSpec", "TransformerCase"]


class ModelCase(Protocol):
    """What the measurement needs of a model: its name and rounds, how to build it and its data,
    the loss of one micro-batch (summed over its items), and its PyTorch twin."""

    name: str
    repeats: int
    warmup: int

    @property
    def items_per_row(self) -> int:
        """Items (what the loss sums over and the window divides by) in one row of ``data``:
        1 for a classifier, the block size for next-character prediction."""
        ...

    def describe(self) -> dict[str, Any]:
        """The model's own entries of its result section (before parameters and timings), with
        a one-line ``shape``."""
        ...

    def model(self, device: str, rng: np.random.Generator) -> nn.Module: ...

    def data(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` items: micro-batch i of a window is rows [i*b, (i+1)*b)."""
        ...

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor: ...

    def torch_model(self, torch: Any, model: nn.Module) -> Any:
        """The same model in PyTorch, with the same initial values, on the CPU."""
        ...

    def torch_loss(self, torch: Any, model: Any, x: Any, y: Any) -> Any: ...


@dataclass(frozen=True)
class ModelSpec:
    """An MLP (Linear-ReLU-...-Linear) of layer widths ``dims`` and the data it reads."""

    name: str
    dims: tuple[int, ...]
    dataset: str  # "digits" (scikit-learn's, 64 features, 10 classes) or "synthetic" (Gaussian inputs)
    repeats: int
    warmup: int

    def __post_init__(self) -> None:
        if len(self.dims) < 2:
            raise ValueError(f"ModelSpec {self.name}: dims needs at least (in, out), got {self.dims}")
        if self.dataset not in ("digits", "synthetic"):
            raise ValueError(f"ModelSpec {self.name}: dataset must be 'digits' or 'synthetic', got {self.dataset!r}")
        if self.dataset == "digits" and (self.dims[0] != 64 or self.dims[-1] != 10):
            raise ValueError(f"ModelSpec {self.name}: digits needs dims (64, ..., 10), got {self.dims}")

    @property
    def items_per_row(self) -> int:
        return 1

    def describe(self) -> dict[str, Any]:
        return {"dims": list(self.dims), "dataset": self.dataset, "shape": "-".join(str(d) for d in self.dims)}

    def model(self, device: str, rng: np.random.Generator) -> nn.Sequential:
        layers: list[nn.Module] = []
        for i, (fan_in, fan_out) in enumerate(pairwise(self.dims)):
            layers.append(nn.Linear(fan_in, fan_out, device=device, rng=rng))
            if i < len(self.dims) - 2:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    def data(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` items: micro-batch i of a window is rows [i*b, (i+1)*b), so k micro-batches
        cover exactly the rows of the big batch of k*b they are compared with."""
        if self.dataset == "digits":
            from minitorch_accum.data import load_digits

            features, labels = load_digits().arrays
            if count > len(features):
                raise ValueError(f"{self.name}: k*b = {count} is more than the {len(features)} digits")
            order = rng.permutation(len(features))[:count]
            return np.ascontiguousarray(features[order]), labels[order]
        features = rng.standard_normal((count, self.dims[0]), dtype=np.float32)
        return features, rng.integers(0, self.dims[-1], size=count)

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(model(x), y, reduction="sum")

    def torch_model(self, torch: Any, model: nn.Module) -> Any:
        modules = []
        for layer in model:  # type: ignore[attr-defined]  (a Sequential, built by model())
            if isinstance(layer, nn.Linear):
                twin = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
                with torch.no_grad():
                    # ours stores the weight (in, out), torch (out, in)
                    twin.weight.copy_(torch.from_numpy(np.ascontiguousarray(layer.weight.numpy().T)))
                    if layer.bias is not None:
                        twin.bias.copy_(torch.from_numpy(layer.bias.numpy()))
                modules.append(twin)
            else:
                modules.append(torch.nn.ReLU())
        return torch.nn.Sequential(*modules)

    def torch_loss(self, torch: Any, model: Any, x: Any, y: Any) -> Any:
        return torch.nn.functional.cross_entropy(model(x), y, reduction="sum")


# the digits MLP's windows take milliseconds: many rounds are cheap and steady its medians
DIGITS = ModelSpec("digits_mlp", (64, 128, 10), "digits", repeats=61, warmup=5)
# a round of the wide MLP is 31 micro-batches per variant for k in {1, 2, 4, 8, 16}: about
# 10 s on two idle cores, several times that when another process holds a core
WIDE = ModelSpec("wide_mlp", (1024, 4096, 4096, 10), "synthetic", repeats=7, warmup=1)


@dataclass(frozen=True)
class TransformerCase:
    """The character transformer of ``maccum train --dataset chars`` (``models.CharTransformer``:
    causal multi-head attention, GELU MLP, LayerNorm, residuals, a head tied to the token
    embedding) on chunks of the shipped text. A row is a chunk of ``block_size`` characters;
    its items are the ``block_size`` target characters."""

    name: str
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    repeats: int
    warmup: int
    optimizer: str = "sgd"  # "sgd" (SGD with momentum) or "adamw" (nanoGPT's: betas 0.9, 0.99; decay 0.1)

    @property
    def items_per_row(self) -> int:
        return self.block_size

    def _train_windows(self) -> Any:
        from minitorch_accum.data import load_chars

        return load_chars(self.block_size).split(0.9)[0]

    def config(self) -> Any:
        from minitorch_accum.models import TransformerConfig

        return TransformerConfig(self._train_windows().vocab_size, self.block_size, self.n_layer, self.n_head,
                                 self.n_embd)

    def describe(self) -> dict[str, Any]:
        config = self.config()
        return {"dataset": "chars", "block_size": self.block_size, "n_layer": self.n_layer, "n_head": self.n_head,
                "n_embd": self.n_embd, "vocab_size": config.vocab_size,
                "shape": f"transformer {self.n_layer}x{self.n_embd}, {self.n_head} heads, block {self.block_size}, "
                         f"vocabulary {config.vocab_size}, tied head"}

    def model(self, device: str, rng: np.random.Generator) -> nn.Module:
        from minitorch_accum.backend import manual_seed
        from minitorch_accum.models import CharTransformer

        manual_seed(int(rng.integers(2**31)))  # the model draws its initial values from the seeded generator
        model = CharTransformer(self.config())
        model.to(device=device)
        return model

    def data(self, count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``count`` chunks of the training text in a random order: (ids, next characters)."""
        windows = self._train_windows()
        if count > len(windows):
            raise ValueError(f"{self.name}: k*b = {count} windows is more than the {len(windows)} of the text "
                             f"(block {self.block_size})")
        return windows.get_batch(rng.permutation(len(windows))[:count])

    def loss(self, model: nn.Module, x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(model(x), y, reduction="sum")

    def torch_model(self, torch: Any, model: nn.Module) -> Any:
        twin = _torch_transformer(torch, model.config)  # type: ignore[attr-defined]  (a CharTransformer)
        theirs = dict(twin.named_parameters())
        ours = dict(model.named_parameters())
        if set(theirs) != set(ours):
            raise ValueError(f"{self.name}: the PyTorch twin's parameters {sorted(theirs)} are not ours {sorted(ours)}")
        with torch.no_grad():
            for name, p in ours.items():
                # ours keeps Linear weights (and the head tied into wte) as (in, out), torch (out, in)
                value = p.numpy().T if p.layout == "in_out" else p.numpy()
                theirs[name].copy_(torch.from_numpy(np.ascontiguousarray(value)))
        return twin

    def torch_loss(self, torch: Any, model: Any, x: Any, y: Any) -> Any:
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum")


def _torch_transformer(torch: Any, config: Any) -> Any:
    """The same transformer in PyTorch eager, with the same parameter names; the head's weight
    is the token embedding's (``wte.weight = head.weight``), counted once."""
    nn_ = torch.nn

    class Attention(nn_.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn_.Linear(config.n_embd, 3 * config.n_embd)
            self.proj = nn_.Linear(config.n_embd, config.n_embd)

        def forward(self, x: Any) -> Any:
            batch, length, width = x.shape
            q, k, v = (t.view(batch, length, config.n_head, width // config.n_head).transpose(1, 2)
                       for t in self.qkv(x).split(config.n_embd, dim=2))
            y = nn_.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(batch, length, width))

    class Block(nn_.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn_.LayerNorm(config.n_embd)
            self.attn = Attention()
            self.ln_2 = nn_.LayerNorm(config.n_embd)
            self.mlp = nn_.Sequential(nn_.Linear(config.n_embd, 4 * config.n_embd), nn_.GELU(),
                                      nn_.Linear(4 * config.n_embd, config.n_embd))

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Transformer(nn_.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn_.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn_.Embedding(config.block_size, config.n_embd)
            self.blocks = nn_.ModuleList([Block() for _ in range(config.n_layer)])
            self.ln_f = nn_.LayerNorm(config.n_embd)
            self.head = nn_.Linear(config.n_embd, config.vocab_size, bias=False)
            self.wte.weight = self.head.weight

        def forward(self, ids: Any) -> Any:
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[-1], device=ids.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return Transformer()


# maccum's chars task as it trains by default: a micro-batch of 32 windows is ~30 ms on two cores
CHARS = TransformerCase("char_transformer", block_size=32, n_layer=2, n_head=4, n_embd=64, repeats=7, warmup=1)
# nanoGPT's Shakespeare-on-a-CPU configuration (its README: block 64, batch 12, 4 layers, 4 heads,
# 128 wide, dropout 0, AdamW), on the same characters; a micro-batch is 12 windows of 64
NANOGPT_CPU = TransformerCase("nanogpt_cpu", block_size=64, n_layer=4, n_head=4, n_embd=128, repeats=5, warmup=1,
                              optimizer="adamw")

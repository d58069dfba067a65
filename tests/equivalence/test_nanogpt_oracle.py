"""A nanoGPT-shaped model written the way a PyTorch user writes it, against PyTorch in float64.

Token and position embeddings, causal multi-head attention with q, k, v from one Linear
split on the last axis and viewed/transposed into heads (through the fused
``F.scaled_dot_product_attention(is_causal=True)``, or a ``tril`` mask, ``masked_fill``
with -inf and ``softmax``), a GELU MLP, LayerNorm, residuals, a head tied to the token
embedding (``wte.weight = lm_head.weight``), and ``cross_entropy(logits.view(-1, V),
targets.view(-1), ignore_index=-1)``. The same weights in both libraries: the loss and
every parameter's gradient agree to ~1e-12, and so does the gradient accumulated over
uneven micro-batches (reduction "items", every fusion mode) with the big batch's.

What differs from the PyTorch text is what this library decides on purpose: ``x.shape``
for ``x.size()`` (``size`` is the element count, as in Burn), ``.eq(0)`` for ``== 0``
(``==`` is identity: tensors are dict keys), and gradients from ``loss.backward()``.

Runs when the ``oracle`` extra (torch) is installed; skipped otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

import minitorch_accum as mta
from minitorch_accum import nn, optim
from minitorch_accum.accum import Accumulator
from minitorch_accum.nn import functional as F

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle


@dataclass
class GPTConfig:
    block_size: int = 8
    vocab_size: int = 13
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 8
    dropout: float = 0.0
    bias: bool = True
    flash: bool = True


# ----------------------------------------------------------------- this library
class LayerNorm(nn.Module):
    """LayerNorm but with an optional bias (nanoGPT's own class)."""

    def __init__(self, ndim: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(mta.ones(ndim))
        self.bias = nn.Parameter(mta.zeros(ndim)) if bias else None

    def forward(self, input: mta.Tensor) -> mta.Tensor:
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = config.flash
        if not self.flash:
            self.register_buffer("bias", mta.tril(mta.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                               dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            att = att.masked_fill(self.bias[:, :, :T, :T].eq(0), float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: mta.Tensor) -> mta.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, nanoGPT's spelling

    def forward(self, idx: mta.Tensor, targets: mta.Tensor | None = None) -> tuple[mta.Tensor, mta.Tensor | None]:
        _, t = idx.shape
        pos = mta.arange(0, t, dtype=mta.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay: float, learning_rate: float,
                             betas: tuple[float, float]) -> optim.AdamW:
        param_dict = {pn: p for pn, p in self.named_parameters()}
        param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return optim.AdamW(optim_groups, lr=learning_rate, betas=betas)


# ---------------------------------------------------------------------- PyTorch
class TorchAttention(torch.nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_attn = torch.nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = torch.nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head, self.n_embd = config.n_head, config.n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TorchBlock(torch.nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = TorchAttention(config)
        self.ln_2 = torch.nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = torch.nn.ModuleDict(dict(c_fc=torch.nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias),
                                            c_proj=torch.nn.Linear(4 * config.n_embd, config.n_embd,
                                                                   bias=config.bias)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        h = self.ln_2(x)
        return x + self.mlp.c_proj(torch.nn.functional.gelu(self.mlp.c_fc(h)))


class TorchGPT(torch.nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(config.vocab_size, config.n_embd),
            wpe=torch.nn.Embedding(config.block_size, config.n_embd),
            h=torch.nn.ModuleList([TorchBlock(config) for _ in range(config.n_layer)]),
            ln_f=torch.nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = torch.nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1]))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


# ---------------------------------------------------------------------- the test
@pytest.fixture
def float64_defaults():
    """float64 as the default dtype in both libraries, as a user comparing them would set it."""
    ours, theirs = mta.get_default_dtype(), torch.get_default_dtype()
    mta.set_default_dtype(mta.float64)
    torch.set_default_dtype(torch.float64)
    yield
    mta.set_default_dtype(ours)
    torch.set_default_dtype(theirs)


def as_torch(p: nn.Param, value: np.ndarray | None = None) -> np.ndarray:
    """A parameter (or its gradient) in PyTorch's layout: Linear weights, and the head's weight
    tied into wte, are (out, in) there."""
    value = p.numpy() if value is None else np.asarray(value)
    return value.T if p.layout == "in_out" else value


def twins(config: GPTConfig) -> tuple[GPT, torch.nn.Module]:
    mta.manual_seed(0)
    model = GPT(config)
    reference = TorchGPT(config)
    theirs = dict(reference.named_parameters())
    assert set(theirs) == {name for name, _ in model.named_parameters()}
    with torch.no_grad():
        for name, p in model.named_parameters():
            theirs[name].copy_(torch.from_numpy(as_torch(p)))
    return model, reference


def batch(config: GPTConfig, rows: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, config.vocab_size, size=(rows, config.block_size - 1))
    targets = rng.integers(0, config.vocab_size, size=idx.shape)
    targets[0, :3] = -1  # padding: the micro-batches hold different numbers of items
    targets[rows - 1, -2:] = -1
    return idx, targets


def compare(model: GPT, grads: mta.Gradients, reference: torch.nn.Module, tolerance: float) -> float:
    """Every gradient against PyTorch's; the largest difference."""
    theirs = dict(reference.named_parameters())
    worst = 0.0
    for name, p in model.named_parameters():
        got, expected = as_torch(p, grads[p]), theirs[name].grad.numpy()
        np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance, err_msg=name)
        worst = max(worst, float(np.abs(got - expected).max()))
    return worst


def torch_optimizer(reference: torch.nn.Module, weight_decay: float, lr: float,
                    betas: tuple[float, float]) -> torch.optim.AdamW:
    params = [p for p in reference.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas)


@pytest.mark.parametrize(("flash", "bias"), [(True, True), (False, True), (True, False)])
def test_nanogpt_loss_every_gradient_and_an_adamw_step_match_pytorch(flash: bool, bias: bool,
                                                                      float64_defaults: None) -> None:
    config = GPTConfig(flash=flash, bias=bias)
    model, reference = twins(config)
    assert len(model.parameters()) == len(list(reference.parameters()))  # the tied head counted once
    idx, targets = batch(config, rows=4)
    logits, loss = model(mta.tensor(idx), mta.tensor(targets))
    grads = loss.backward()
    ref_logits = reference(torch.from_numpy(idx))
    ref_loss = torch.nn.functional.cross_entropy(ref_logits.view(-1, ref_logits.size(-1)),
                                                 torch.from_numpy(targets).view(-1), ignore_index=-1)
    ref_loss.backward()
    assert logits.dtype == mta.float64
    np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-13)
    compare(model, grads, reference, tolerance=1e-12)
    # nanoGPT's configure_optimizers: decay for matrices, none for vectors
    model.configure_optimizers(0.1, 1e-2, (0.9, 0.95)).step(model, grads)
    torch_optimizer(reference, 0.1, 1e-2, (0.9, 0.95)).step()
    theirs = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        # the key bias's gradient is 0 up to rounding (softmax ignores a shift shared by all keys);
        # Adam divides it by sqrt(v) + eps = 1e-8, so 1e-17 of rounding moves it by ~1e-11
        np.testing.assert_allclose(as_torch(p), theirs[name].detach().numpy(), rtol=0, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("fusion", ["leaf", "gemm", "none"])
def test_nanogpt_accumulated_over_uneven_micro_batches_matches_the_pytorch_big_batch(
        fusion: str, float64_defaults: None) -> None:
    config = GPTConfig()
    model, reference = twins(config)
    idx, targets = batch(config, rows=6, seed=2)
    sizes = [3, 1, 2]
    acc = Accumulator(model, steps=len(sizes), reduction="items", fusion=fusion)
    start = 0
    for size in sizes:
        part = slice(start, start + size)
        start += size
        logits, _ = model(mta.tensor(idx[part]))
        part_targets = mta.tensor(targets[part])
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), part_targets.view(-1), ignore_index=-1,
                               reduction="sum")
        acc.backward(loss, num_items=F.count_items(part_targets, ignore_index=-1))
    window = acc.grads()
    ref_logits = reference(torch.from_numpy(idx))
    torch.nn.functional.cross_entropy(ref_logits.view(-1, ref_logits.size(-1)), torch.from_numpy(targets).view(-1),
                                      ignore_index=-1).backward()
    compare(model, window, reference, tolerance=1e-12)

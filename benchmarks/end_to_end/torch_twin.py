"""The same model, initial values and window loop in PyTorch eager: loss summed over a
micro-batch's items and divided by the window's items, ``.backward()`` accumulating into
``.grad``, ``SGD(momentum).step()`` (or AdamW, as the case says) and ``zero_grad()`` per window."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.end_to_end.cases import ModelCase
from benchmarks.end_to_end.windows import Phases
from minitorch_accum import nn

__all__ = ["TorchTwin"]


class TorchTwin:
    """PyTorch eager twin of one model case, with its micro-batches on the run's device."""

    def __init__(self, torch: Any, case: ModelCase, model: nn.Module, features: np.ndarray, labels: np.ndarray,
                 b: int, max_k: int, device: str, lr: float, momentum: float, optimizer: str = "sgd") -> None:
        self.torch = torch
        self.case = case
        self.device = "cuda" if device != "cpu" else "cpu"
        self.model = case.torch_model(torch, model).to(self.device)
        if optimizer == "adamw":  # nanoGPT's betas and decay, on every parameter (as ours)
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
        else:
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
        self.micro = [(torch.from_numpy(features[i * b:(i + 1) * b]).to(self.device),
                       torch.from_numpy(labels[i * b:(i + 1) * b].astype(np.int64)).to(self.device))
                      for i in range(max_k)]
        self.items = b * case.items_per_row

    def synchronize(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def window(self, k: int, phases: Phases, sync: Callable[[], None]) -> Callable[[], None]:
        torch, case = self.torch, self.case
        model, optimizer, micro, items = self.model, self.optimizer, self.micro[:k], float(k * self.items)

        def run() -> None:
            start = time.perf_counter()
            for x, y in micro:
                (case.torch_loss(torch, model, x, y) / items).backward()
            sync()
            stepped = time.perf_counter()
            optimizer.step()
            optimizer.zero_grad()
            sync()
            phases.accumulate.append(stepped - start)
            phases.update.append(time.perf_counter() - stepped)
        return run

"""Check a PyTorch loop and model: the equivalence checks of ``minitorch_accum.testing`` for torch.

    import torch

    def make_loop(k):                              # your model, optimizer, scheduler and loop
        model = torch.nn.Linear(8, 3).double()
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)
        def window(micro_batches):                 # exactly what your loop runs for one optimizer step
            items = sum(len(y) for _, y in micro_batches)
            for x, y in micro_batches:
                (torch.nn.functional.cross_entropy(model(x), y, reduction="sum") / items).backward()
            opt.step(); opt.zero_grad()
        return model, window

    check_training_loop(make_loop, (x, y))         # or the pytest fixture torch_accumulation_equivalence

- ``check_training_loop(make_loop, batch)``: your loop built for k micro-batches per step against
  the same loop built for one micro-batch of the k*b rows, through your optimizer, scheduler,
  clipping; with ``Loop(model, window, state=, restore=)`` also a resume into a fresh loop (torch's
  generator reseeded, so a dropout generator left out of the state shows);
- ``check_module(model_factory, loss_fn, batch)``: a torch Module's window gradient (``.grad``
  accumulated over micro-batches, divided by the window's items) against the big batch's, within
  the rounding bound from per-row gradients (``torch.func``), and ``loss_fn``'s item count;
- the fixture ``torch_accumulation_equivalence`` (registered by the package's pytest plugin when
  torch is installed).

PyTorch is an optional extra (``pip install "minitorch_accum[oracle]"``): this package imports
without it, and its checks say so when it is missing.
"""

from minitorch_accum.testing import _lazy_exports

_HOMES = {"TORCH": "loop", "Loop": "loop", "check_training_loop": "loop", "require_torch": "loop",
          "check_module": "module_check"}

__all__ = sorted(_HOMES)

__getattr__, __dir__ = _lazy_exports(globals(), _HOMES)

"""Lightning's ``accumulate_grad_batches`` under check_training_loop: a LightningModule whose
``training_step`` returns the micro-batch's mean loss, plain SGD, one epoch per window. Full
windows of equal micro-batches pass; a window holding fewer than k micro-batches (the epoch's
last, or a whole epoch shorter than k: Lightning issue #21808) is flagged, and the report names
the rule: Lightning divides every micro-batch's loss by k (``closure_loss / accumulate_grad_batches``),
so a window of n < k steps n/k of the big batch's step (Lightning issue #19987).
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    lightning = pytest.importorskip("lightning", reason="the peers extra (lightning) is not installed")

from minitorch_accum.testing.torch import Loop, check_training_loop  # noqa: E402

# Lightning's own warnings (few batches, no workers) and its releases' deprecations are not the check's
pytestmark = [pytest.mark.oracle,
              pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning")]


class Classifier(lightning.LightningModule):
    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.5)


def make_lightning_loop(k: int, root: str) -> Loop:
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    module = Classifier(net)

    def train(windows: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> None:
        trainer = lightning.Trainer(max_epochs=len(windows), accumulate_grad_batches=k, accelerator="cpu", devices=1,
                                    logger=False, enable_checkpointing=False, enable_progress_bar=False,
                                    enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=root)
        # one epoch: the window's micro-batches, in order (batch_size=None: each item is a batch already)
        trainer.fit(module, train_dataloaders=torch.utils.data.DataLoader(windows[0], batch_size=None))

    return Loop(net, train=train)


def test_lightning_passes_full_windows_and_its_partial_window_is_named_the_nominal_k_rule(tmp_path) -> None:
    generator = torch.Generator().manual_seed(0)
    batch = (torch.randn(12, 6, generator=generator, dtype=torch.float64), torch.arange(12) % 3)
    full = check_training_loop(lambda k: make_lightning_loop(k, str(tmp_path)), batch, splits=[(3, 3, 3, 3)],
                               windows=2, partial=False)
    assert full.results[0].status == "passed", str(full)
    report = check_training_loop(lambda k: make_lightning_loop(k, str(tmp_path)), batch, splits=[(3, 3, 3, 3)],
                                 windows=2, raise_on_failure=False)
    steps = report.results[0]
    assert steps.status == "failed" and "in a partial window (k=5)" in steps.worst_parameter()[1].scenario
    assert any("0.8 times the big batch's" in note and "the nominal-k rule" in note and "(4/5)" in note
               for note in steps.notes), steps.notes

"""A plain PyTorch loop as most are written: each micro-batch's loss a mean over its own tokens,
divided by the number of micro-batches (``loss / accumulation_steps``). On padded sequences of
uneven lengths it is a mean of micro-batch means and check_training_loop flags it; the same loop
normalized by the window's tokens passes. Needs torch only (the oracle extra)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from minitorch_accum.testing import AccumulationMismatch  # noqa: E402
from minitorch_accum.testing.torch import check_training_loop  # noqa: E402

pytestmark = pytest.mark.oracle
VOCAB = 12


def _sequences() -> tuple[torch.Tensor, torch.Tensor]:
    """Eight token sequences of lengths 1 to 6, padded: labels past a length are -100."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (8, 6), generator=generator)
    lengths = torch.tensor([6, 1, 2, 6, 3, 1, 5, 2])
    labels = torch.where(torch.arange(6)[None, :] < lengths[:, None], torch.roll(ids, -1, dims=1), -100)
    return ids, labels


def loop(normalized_by_tokens: bool):
    def make_loop(k: int):
        model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 8), torch.nn.Tanh(), torch.nn.Linear(8, VOCAB)).double()
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1)

        def window(micro_batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
            tokens = sum(int((labels != -100).sum()) for _, labels in micro_batches)
            for ids, labels in micro_batches:
                logits = model(ids).flatten(0, 1)
                if normalized_by_tokens:
                    loss = torch.nn.functional.cross_entropy(logits, labels.flatten(), reduction="sum") / tokens
                else:  # the usual loop: a mean over the micro-batch's tokens, over the accumulation steps
                    loss = torch.nn.functional.cross_entropy(logits, labels.flatten()) / len(micro_batches)
                loss.backward()
            opt.step()
            opt.zero_grad()

        return model, window

    return make_loop


def test_a_plain_loop_with_a_mean_of_means_is_flagged() -> None:
    with pytest.raises(AccumulationMismatch, match=r"loop_steps_equal_big_batch: .* split \(2, 4, 2\)") as caught:
        check_training_loop(loop(normalized_by_tokens=False), _sequences(), splits=[(2, 4, 2)])
    assert "no multiple of the big batch's" in "\n".join(caught.value.__notes__)


def test_the_same_loop_normalized_by_the_windows_tokens_passes() -> None:
    report = check_training_loop(loop(normalized_by_tokens=True), _sequences(), splits=[(2, 4, 2), (1,) * 8])
    assert report.results[0].status == "passed", str(report)

"""The Hugging Face Trainer under check_training_loop: a tiny GPT-2 built from a config (random
weights, nothing downloaded), padded sequences of uneven lengths, ``gradient_accumulation_steps=k``,
the Trainer's own AdamW and linear schedule. The loop built for k runs the Trainer over epochs of
k micro-batches; the big batch is the same Trainer with k = 1 and one micro-batch of every row.

What the check found, release by release (each read in the Trainer's source and run here):

- up to 4.48.2: each micro-batch's loss is the mean over its own tokens, divided by k: a mean of
  means, flagged. The fix of transformers PR #34191 is in the Trainer from 4.46.0 on, but it passes
  ``num_items_in_batch`` only to models whose ``forward`` takes ``**kwargs``; GPT-2's does from
  4.48.3 on (4.45.2 is the last release before the fix, the ``hf-before-fix`` extra);
- 4.48.3 to 4.51: full windows pass; a partial window is flagged as dropped: the Trainer counted the
  last window's micro-batches from the examples, not the batches (``remainder = num_examples % gas``,
  transformers issue #37777, fixed by PR #37923);
- 4.52 on: both fixed, the loop passes (the ``peers`` extra: 4.52.1, 4.52.0 being yanked).
"""

from __future__ import annotations

import importlib.metadata
import warnings

import pytest

torch = pytest.importorskip("torch")
with warnings.catch_warnings():  # a release of 2024 warns under today's torch as it imports
    warnings.simplefilter("ignore")
    transformers = pytest.importorskip("transformers", reason="the peers extra (or hf-before-fix) is not installed")

from minitorch_accum.testing import AccumulationMismatch  # noqa: E402
from minitorch_accum.testing.torch import Loop, check_training_loop  # noqa: E402

# the releases' own deprecation and future warnings under today's torch are theirs, not the check's
pytestmark = [pytest.mark.oracle,
              pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning")]

VERSION = tuple(int(part) for part in importlib.metadata.version("transformers").split(".")[:3] if part.isdigit())
#: the first release whose Trainer normalizes GPT-2 by the window's tokens (transformers PR #34191 in the
#: Trainer since 4.46.0; GPT2LMHeadModel.forward takes **kwargs, so it receives num_items_in_batch, since 4.48.3)
FIXED_FOR_GPT2 = (4, 48, 3)
#: the first release that steps a partial window whole (transformers PR #37923; 4.52.0 is yanked)
PARTIAL_WINDOW_FIXED = (4, 52, 0)
RELEASE = importlib.metadata.version("transformers")
VOCAB, LENGTH = 50, 8
LENGTHS = (8, 2, 5, 3, 8, 1)


def _batch() -> dict[str, torch.Tensor]:
    """Six sequences of uneven lengths, padded on the right: the positions past a length are no labels.
    No attention mask is needed (a causal model's tokens never see the padding after them), and none
    is given: the releases build it with a float32 fill that a float64 model overflows."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (len(LENGTHS), LENGTH), generator=generator)
    real = torch.arange(LENGTH)[None, :] < torch.tensor(LENGTHS)[:, None]
    return {"input_ids": torch.where(real, ids, 0), "labels": torch.where(real, ids, -100)}


def make_trainer_loop(k: int, output_dir: str) -> Loop:
    """The Trainer with gradient_accumulation_steps=k; each window one epoch of its micro-batches."""
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=1, n_head=2,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).double()

    class InOrder(transformers.Trainer):  # the micro-batches as the check cut them, not shuffled
        def _get_train_sampler(self, *args, **kwargs):
            return torch.utils.data.SequentialSampler(self.train_dataset)

    def train(windows: list[list[dict[str, torch.Tensor]]]) -> None:
        micro_batches = windows[0]  # every window holds the same rows: one epoch each
        size = len(micro_batches[0]["input_ids"])
        assert all(len(m["input_ids"]) == size for m in micro_batches), "the Trainer takes equal micro-batches"
        rows = [{key: value[r] for key, value in m.items()} for m in micro_batches for r in range(size)]
        args = transformers.TrainingArguments(
            output_dir, per_device_train_batch_size=size, gradient_accumulation_steps=k,
            num_train_epochs=len(windows), learning_rate=1e-2, weight_decay=0.01, use_cpu=True,
            report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True)
        InOrder(model=model, args=args, train_dataset=rows).train()

    return Loop(model, train=train)


@pytest.fixture
def trainer_loop(tmp_path):
    return lambda k: make_trainer_loop(k, str(tmp_path))


@pytest.mark.skipif(VERSION >= FIXED_FOR_GPT2, reason=f"transformers {RELEASE} normalizes GPT-2 by the window's "
                                                      "tokens; the hf-before-fix extra installs 4.45.2")
def test_the_trainer_before_the_fix_is_flagged_as_a_mean_of_means(trainer_loop) -> None:
    with pytest.raises(AccumulationMismatch, match=r"loop_steps_equal_big_batch: .* split \(2, 2, 2\) in a full "
                                                   r"window \(k=3\)") as caught:
        check_training_loop(trainer_loop, _batch(), splits=[(2, 2, 2)], windows=2, partial=False)
    assert "no multiple of the big batch's" in "\n".join(caught.value.__notes__)


@pytest.mark.skipif(not FIXED_FOR_GPT2 <= VERSION < PARTIAL_WINDOW_FIXED,
                    reason=f"transformers {RELEASE} is not a release between the two fixes (4.48.3 to 4.51)")
def test_the_trainer_between_the_fixes_passes_full_windows_and_drops_a_partial_one(trainer_loop) -> None:
    full = check_training_loop(trainer_loop, _batch(), splits=[(2, 2, 2), (3, 3)], windows=2, partial=False)
    assert full.results[0].status == "passed", str(full)
    report = check_training_loop(trainer_loop, _batch(), splits=[(2, 2, 2)], windows=2, raise_on_failure=False)
    steps = report.results[0]
    assert steps.status == "failed" and "in a partial window (k=4)" in steps.worst_parameter()[1].scenario
    assert any("moved no parameter: it took no optimizer step, the window was dropped" in n for n in steps.notes)


@pytest.mark.skipif(VERSION < PARTIAL_WINDOW_FIXED, reason=f"transformers {RELEASE} is a release before both fixes "
                                                           "reached GPT-2 (4.52); the peers extra installs one")
def test_the_trainer_after_the_fix_passes(trainer_loop) -> None:
    report = check_training_loop(trainer_loop, _batch(), splits=[(2, 2, 2), (3, 3)], windows=2)
    (steps,) = report.results
    assert steps.status == "passed", str(report)

"""The bug museum: real, public gradient-accumulation bugs, reproduced on this engine and caught.

    from minitorch_accum.testing import bugs
    for exhibit in bugs.EXHIBITS.values():
        measured = bugs.measure(exhibit)          # the faulty recipe and the correct one, same model
        assert measured.caught, measured.exhibit.name
    print(bugs.describe(bugs.measure(bugs.exhibit("mean_of_means"))))     # maccum bugs show mean_of_means

Each exhibit is a faulty ``Recipe`` (``bug_recipes.py``: one hook of the correct recipe
overridden, the library untouched), a small model and batch it shows on, the property of
``minitorch_accum.testing.properties`` that catches it, and where the bug was reported. An
exhibit is *caught* when its property fails for the faulty recipe and passes for the correct
one on the same model; the BatchNorm exhibit is not a bug of any recipe, and is shown "not
expected to be equal" under both.
"""

from __future__ import annotations

import contextlib
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minitorch_accum.accum.normalization import window_scale
from minitorch_accum.autodiff import Tensor
from minitorch_accum.backend import manual_seed
from minitorch_accum.nn import BatchNorm1d, Embedding, Linear, Module, Sequential, Tanh
from minitorch_accum.nn import functional as F
from minitorch_accum.testing import bug_recipes as faulty
from minitorch_accum.testing.check_context import CheckContext
from minitorch_accum.testing.properties import property_named
from minitorch_accum.testing.property_results import FAILED, INEXACT, PASSED, PropertyResult
from minitorch_accum.testing.recipes import Recipe
from minitorch_accum.testing.subject import LossFn, Subject
from minitorch_accum.testing.summed_losses import shifted_cross_entropy, summed_cross_entropy
from minitorch_accum.testing.tolerance_words import gap_words, share_of_largest, tolerance_words

__all__ = ["EXHIBITS", "Citation", "Exhibit", "Measurement", "code_pairs", "describe", "exhibit", "measure",
           "show_code"]


@dataclass(frozen=True)
class Citation:
    """Where a bug was reported or fixed: the project and its issue or pull request."""

    project: str
    reference: str
    title: str = ""  # the or pull request's own title
    note: str = ""  # what it shows, in our words

    def __str__(self) -> str:
        return (f"{self.project} {self.reference}" + (f' "{self.title}"' if self.title else "")
                + (f" ({self.note})" if self.note else ""))


@dataclass(frozen=True)
class Exhibit:
    """One bug: its recipe, the model it is shown on, the property that catches it, its sources."""

    name: str
    title: str
    recipe: Callable[[], Recipe]
    subject: Callable[[], Subject]
    splits: tuple[tuple[int, ...], ...]
    property: str
    citations: tuple[Citation, ...]
    inexact: bool = False  # shown, not a bug: no recipe can make the window equal the big batch
    #: where the bug lived in the loss rather than the loop: the subject with the faulty ``loss_fn``
    #: (``recipe`` is then the correct one) and what it does
    faulty_subject: Callable[[], Subject] | None = None
    faulty_loss: str = ""
    #: the same fault made in any correct ``loss_fn`` of its kind (the false-alarm corpus's families)
    faulty_loss_of: Callable[[LossFn], LossFn] | None = None

    @property
    def what(self) -> str:
        return self.faulty_loss or self.recipe().summary


@dataclass(frozen=True)
class Measurement:
    """An exhibit's property under the faulty recipe and under the correct one."""

    exhibit: Exhibit
    faulty: PropertyResult
    correct: PropertyResult
    gradient_scale: float  # the big batch's largest gradient entry, to read the gaps against

    @property
    def caught(self) -> bool:
        """The property fails the faulty recipe and passes the correct one (both inexact, with a
        gap, for an inexact exhibit)."""
        if self.exhibit.inexact:
            return self.faulty.status == self.correct.status == INEXACT and self.correct.max_gap > 0
        return self.faulty.status == FAILED and self.correct.status == PASSED


# ---------------------------------------------------------------- the models the bugs are shown on
def _shifted_cross_entropy_counted_before_the_shift(output: Tensor, labels: np.ndarray) -> tuple[Tensor, int]:
    """The Trainer's count before transformers PR #46204: the labels counted before the causal shift."""
    targets = labels[:, 1:]
    return F.cross_entropy(output[:, :-1], targets, reduction="sum"), F.count_items(labels)


def _counted_before_the_shift(loss_fn: LossFn) -> LossFn:
    """``loss_fn`` (a causal LM's, shifting its labels inside) with the labels counted before the shift,
    as ``_shifted_cross_entropy_counted_before_the_shift`` counts them."""

    def counted_before_the_shift(output: Tensor, labels: np.ndarray) -> tuple[Tensor, int]:
        loss, _ = loss_fn(output, labels)
        return loss, F.count_items(labels)

    return counted_before_the_shift


def _mlp() -> Module:
    manual_seed(0)
    return Sequential(Linear(5, 8), Tanh(), Linear(8, 3))


def _mlp_subject() -> Subject:
    rng = np.random.default_rng(0)
    return Subject(_mlp, summed_cross_entropy, (rng.normal(size=(12, 5)), rng.integers(0, 3, 12)))


def _batch_norm_subject() -> Subject:
    def model() -> Module:
        manual_seed(0)
        return Sequential(Linear(5, 8), BatchNorm1d(8), Tanh(), Linear(8, 3))

    rng = np.random.default_rng(0)
    return Subject(model, summed_cross_entropy, (rng.normal(size=(12, 5)), rng.integers(0, 3, 12)))


def _token_model(vocab: int, classes: int) -> Callable[[], Module]:
    def model() -> Module:
        manual_seed(0)
        return Sequential(Embedding(vocab, 6), Tanh(), Linear(6, classes))

    return model


def _padded_sequences(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """8 rows of 6 token ids, their labels padded (-100) after a length of 1 to 6 tokens."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 9, size=(8, 6))
    lengths = np.array([6, 1, 2, 6, 3, 1, 5, 2])
    labels = np.where(np.arange(6)[None, :] < lengths[:, None], rng.integers(0, 4, size=(8, 6)), -100)
    return ids, labels


def _sequence_subject() -> Subject:
    return Subject(_token_model(9, 4), summed_cross_entropy, _padded_sequences())


def _causal_subject(loss_fn: Callable[[Tensor, np.ndarray], tuple[Tensor, int]] = shifted_cross_entropy) -> Subject:
    ids, labels = _padded_sequences()
    labels = np.where(labels == -100, -100, ids)  # a causal LM's labels are its inputs, padding excluded
    return Subject(_token_model(9, 9), loss_fn, (ids, labels))


def _causal_subject_counted_before_the_shift() -> Subject:
    return _causal_subject(_shifted_cross_entropy_counted_before_the_shift)


def _exhibit(name: str, title: str, recipe: Callable[[], Recipe], subject: Callable[[], Subject],
             splits: tuple[tuple[int, ...], ...], caught_by: str, *citations: Citation,
             inexact: bool = False, faulty_subject: Callable[[], Subject] | None = None,
             faulty_loss: str = "", faulty_loss_of: Callable[[LossFn], LossFn] | None = None) -> Exhibit:
    return Exhibit(name, title, recipe, subject, splits, caught_by, citations, inexact, faulty_subject, faulty_loss,
                   faulty_loss_of)


_HF, _LIGHTNING, _BURN = "huggingface/transformers", "Lightning-AI/pytorch-lightning", "tracel-ai/burn"

EXHIBITS: dict[str, Exhibit] = {e.name: e for e in (
    _exhibit("mean_of_means", "mean of micro-batch means over uneven token counts", faulty.MeanOfMicroBatchMeans,
             _sequence_subject, ((2, 3, 3),), "window_equals_full_batch",
             Citation(_HF, "PR #34191", "Fix Gradient Accumulation issue",
                      "2024: the Trainer passes num_items_in_batch")),
    _exhibit("count_before_shift", "token count taken before the label shift", Recipe, _causal_subject, ((2, 3, 3),),
             "item_count_matches_the_loss",
             Citation(_HF, "PR #46204", "Fix `num_items_in_batch` over-counting for causal LM losses",
                      "the Trainer's 2024 count, fixed in 2026"),
             faulty_subject=_causal_subject_counted_before_the_shift, faulty_loss_of=_counted_before_the_shift,
             faulty_loss=("the loss is normalized by the labels counted before the causal shift (the Trainer's "
                          "num_items_in_batch): every row's first label is counted though it is never a target, so "
                          "every gradient is too small by items/(items + rows), in the window and in the big batch "
                          "alike: no comparison of the two sees it unless the big batch is divided by items counted "
                          "apart, as the check does")),
    _exhibit("per_rank_normalization", "each rank normalized by its own token count", faulty.NormalizedPerRank,
             _sequence_subject, ((2, 3, 3),), "data_parallel_equals_one_rank",
             Citation("pytorch/torchtitan", "issue #1842"),
             Citation("pytorch/torchtitan", "PR #2206", "Fix loss computation by handling valid token imbalance")),
    _exhibit("nominal_k_on_partial_window", "every micro-batch divided by the nominal k, a partial window too",
             faulty.NominalKOnPartialWindows, _mlp_subject, ((4, 4, 4),), "window_equals_full_batch",
             Citation(_LIGHTNING, "issue #19987", "Handle gradient accumulations at the end of epoch differently",
                      "the last window scaled by accumulate_grad_batches, not by what it holds")),
    _exhibit("short_epoch_window_divided_by_k", "an epoch shorter than k: one window of N < k, divided by k",
             faulty.LightningStepsOnTheEpochsLastBatch, _mlp_subject, ((3, 3, 3, 3),), "steps_equal_big_batch",
             Citation(_LIGHTNING, "issue #21808", "`accumulate_grad_batches` is silently ignored when epoch length < "
                                                  "`accumulate_grad_batches`, because Lightning always steps on the "
                                                  "last batch"),
             Citation(_LIGHTNING, "PR #21811", "fix: warn when training batches are fewer than "
                                               "`accumulate_grad_batches`", "a warning; the window is still divided "
                                                                            "by k")),
    _exhibit("adam_counts_micro_batches", "Adam's step counter and weight decay advanced per micro-batch",
             faulty.AdamCountsMicroBatches, _mlp_subject, ((3, 1, 4, 4),), "steps_equal_big_batch",
             Citation("keras-team/keras", "issue #19990", "Gradient accumulation done wrong"),
             Citation("keras-team/keras", "PR #19998", "Fix gradient accumulation")),
    _exhibit("clip_per_micro_batch", "gradient clipping at every micro-batch", faulty.ClipsEachMicroBatch,
             _mlp_subject, ((3, 1, 4, 4),), "clipping_uses_the_window_norm",
             Citation("facebookresearch/lingua", "PR #59", "fix gradient clipping w/ gradient accumulation")),
    _exhibit("sum_without_dividing", "micro-batch gradients summed and never divided", faulty.SummedWithoutDividing,
             _mlp_subject, ((4, 4, 4),), "window_equals_full_batch",
             Citation(_BURN, "the grads_accumulation docs", note="GradientsAccumulator sums; lower the learning "
                                                                 "rate by hand"),
             Citation(_BURN, "PR #3581")),
    _exhibit("scheduler_per_micro_batch", "the learning-rate scheduler stepped per micro-batch",
             faulty.ScheduledPerMicroBatch, _mlp_subject, ((3, 1, 4, 4),), "steps_equal_big_batch",
             Citation(_BURN, "PR #3581")),
    _exhibit("burn_partial_window_dropped", "Burn's epoch loop: the partial window dropped, the scheduler per "
                                            "micro-batch", faulty.BurnDropsThePartialWindow, _mlp_subject,
             ((3, 1, 4, 4),), "steps_equal_big_batch",
             Citation(_BURN, "issue #5695", "Gradient accumulation drops final partial window and advances LR "
                                            "scheduler per microbatch", "and grads_accumulation(0) accepted; this "
                                                                        "library refuses it"),
             Citation(_BURN, "PR #5729", note="the fix")),
    _exhibit("reset_every_backward", "the accumulator reset at every backward: only the last micro-batch counts",
             faulty.ResetAtEveryBackward, _mlp_subject, ((3, 1, 4, 4),), "window_equals_full_batch",
             Citation("allenai/open-instruct", "PR #1498", "Fix ZeRO-2 discarding gradients during manual "
                      "accumulation", "DeepSpeed ZeRO-2 with gradient_accumulation_steps=1"),
             Citation("NVIDIA/Megatron-LM", "PR #7186", note="an inherited no_sync that does nothing")),
    _exhibit("float32_accumulator", "a float32 accumulator under a float64 model", faulty.Float32Accumulator,
             _mlp_subject, ((3, 1, 4, 4),), "window_equals_full_batch",
             Citation("google-deepmind/optax", "optax.MultiSteps", note="accumulator_dtype defaults to float32, "
                                                                        "optax/transforms/_accumulation.py")),
    _exhibit("batch_norm_statistics", "BatchNorm statistics per micro-batch (inexact by nature, not a bug)",
             Recipe, _batch_norm_subject, ((3, 2, 3, 4),), "window_equals_full_batch",
             Citation("minitorch_accum", "docs/equivalence.md, property 6", note="by nature, not a bug"),
             inexact=True),
)}


def exhibit(name: str) -> Exhibit:
    """The exhibit called ``name`` (a KeyError listing them otherwise)."""
    try:
        return EXHIBITS[name]
    except KeyError:
        raise KeyError(f"no exhibit {name!r}; the museum holds {', '.join(EXHIBITS)}") from None


def measure(item: Exhibit) -> Measurement:
    """Run the exhibit's property with its faulty recipe and with the correct one, on its model."""
    subject = item.subject()
    run = property_named(item.property)
    context = CheckContext(item.faulty_subject() if item.faulty_subject else subject, item.splits, item.recipe())
    faulty_result = run(context)
    correct_result = run(CheckContext(subject, item.splits, Recipe()))
    scale = max(float(np.max(np.abs(g), initial=0.0)) for g in context.reference().values())
    return Measurement(item, faulty_result, correct_result, scale)


def _sizes(item: Exhibit) -> str:
    subject = item.subject()
    model = subject.build()
    params = list(model.parameters())
    _, items = subject.loss(model, slice(None))
    shapes = ", ".join(str(shape) for shape in subject.shapes())
    return (f"{type(model).__name__} of {sum(p.size for p in params)} parameters in {len(params)} tensors, "
            f"{subject.dtype}; a batch of {subject.rows} rows ({shapes}), {items} items; split "
            + ", ".join(str(s) for s in item.splits))


def describe(measured: Measurement) -> str:
    """What ``maccum bugs show NAME`` prints: the recipe, the sizes, the measured gaps, the property,
    the citations."""
    item = measured.exhibit
    faulty_result, correct_result = measured.faulty, measured.correct
    name, worst = max(faulty_result.worst.items(), key=lambda item: item[1].max_gap)
    # a gap in gradients reads against the largest gradient entry; in parameters or a count it stands alone
    relative = "" if item.property in ("steps_equal_big_batch", "item_count_matches_the_loss") \
        else share_of_largest(worst.max_gap, measured.gradient_scale)
    verdict = ("shown: not expected to be equal under any recipe" if item.inexact
               else "CAUGHT" if measured.caught else "NOT caught")
    kind = "loss_fn" if item.faulty_subject else "recipe"
    lines = [f"{item.name}: {item.title}",
             f"  what the {kind} does: {item.what}",
             f"  shown on: {_sizes(item)}",
             f"  property: {item.property} ({faulty_result.claim})",
             f"  faulty {kind}: {gap_words(faulty_result.status, name, worst, relative, item.inexact)}",
             f"  correct {kind}: {correct_result.status}; max gap {correct_result.max_gap:.3e}",
             f"  verdict: {verdict}"]
    if item.inexact:
        lines.append(f"  why: {'; '.join(dict.fromkeys(correct_result.notes))}")
    lines.append(f"  tolerance: {tolerance_words(item.property, worst.why or faulty_result.why, item.inexact)}")
    lines += [f"  source: {citation}" for citation in item.citations]
    return "\n".join(lines)


# ---------------------------------------------------------------- the code beside the correct code
#: the folder holding the package, to name source files from it
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: what a recipe class holds besides its hooks
_NOT_HOOKS = {"name", "summary", "__module__", "__doc__", "__qualname__", "__dict__", "__weakref__",
              "__firstlineno__", "__static_attributes__", "__annotations__"}


def _source(label: str, value: object) -> tuple[str, str]:
    """(a header naming ``value`` and the file and line it is at, its source dedented); a plain
    attribute as one line of its value."""
    function = value.__func__ if isinstance(value, staticmethod | classmethod) else value
    if inspect.isfunction(function):
        path = Path(inspect.getsourcefile(function) or "?")
        with contextlib.suppress(ValueError):
            path = path.relative_to(_PACKAGE_ROOT)
        where = f"{path}:{inspect.getsourcelines(function)[1]}"
        return f"{label}{function.__qualname__} ({where})", textwrap.dedent(inspect.getsource(function))
    return label.rstrip(" :"), f"{label.rstrip(' :').rsplit('.', 1)[-1]} = {value!r}\n"


def code_pairs(item: Exhibit) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The exhibit's faulty code beside the correct code it replaces, as ((header, source) correct,
    (header, source) faulty) pairs: each hook a faulty recipe overrides, or the faulty ``loss_fn``."""
    if item.faulty_subject is not None:
        return [(_source("correct loss_fn: ", item.subject().loss_fn),
                 _source("faulty loss_fn: ", item.faulty_subject().loss_fn))]
    faulty_class = type(item.recipe())
    if faulty_class is Recipe:  # no recipe is at fault: the model is (BatchNorm)
        return [(("the recipe: Recipe, the correct one, unchanged", ""), _source("the model: ",
                                                                                item.subject().model_factory))]
    pairs = []
    missing = object()
    for cls in faulty_class.__mro__[:faulty_class.__mro__.index(Recipe)]:
        for name, value in cls.__dict__.items():
            if name in _NOT_HOOKS:
                continue
            correct = inspect.getattr_static(Recipe, name, missing)
            pairs.append((_source(f"Recipe.{name}", correct) if correct is not missing and not callable(correct)
                          else _source("", correct) if correct is not missing
                          else (f"Recipe.{name}", "(the correct recipe has no such member)\n"),
                          _source(f"{cls.__name__}.{name}", value) if not callable(value) else _source("", value)))
    return pairs


def show_code(item: Exhibit) -> str:
    """What ``maccum bugs show NAME --code`` adds: each faulty piece of code under the correct one."""
    lines = [f"{item.name}: the code (--- correct, +++ faulty)"]
    for (correct_header, correct_source), (faulty_header, faulty_source) in code_pairs(item):
        lines.append(f"--- {correct_header}")
        lines += [f"  {line}" for line in correct_source.rstrip("\n").splitlines()] if correct_source else []
        lines.append(f"+++ {faulty_header}")
        lines += [f"  {line}" for line in faulty_source.rstrip("\n").splitlines()]
    if item.faulty_subject is None and item.recipe().accumulates_with is not None:
        header, source = _source("", window_scale)
        lines.append(f"=== where accumulates_with (the Accumulator's reduction) acts: {header}")
        lines += [f"  {line}" for line in source.rstrip("\n").splitlines()]
    return "\n".join(lines)

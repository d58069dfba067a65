"""Check the training loop you really run: k micro-batches per step against one micro-batch of
the same k*b rows per step, through your own optimizer, scheduler, clipping and random numbers.

    def make_loop(k):                              # your loop, configured for k micro-batches a step
        model = build_model()
        opt, sched = optim.AdamW(lr=1e-2, weight_decay=0.1), StepLR(1e-2, 1, 0.5)
        acc = Accumulator(model, steps=k)
        def window(micro_batches):                 # exactly what your loop runs for one optimizer step
            for x, y in micro_batches:
                acc.backward(F.cross_entropy(model(mta.tensor(x)), y, reduction="sum"), num_items=len(y))
            opt.step(model, acc.grads(), lr=sched.step()); acc.zero()
        return Loop(model, window)                 # or (model, window); state=/restore= add the resume check

    report = check_training_loop(make_loop, (x, y))        # raises AccumulationMismatch naming the split

``make_loop(k)`` builds a fresh loop for k micro-batches per optimizer step (the check seeds the
framework's generator before each call, so every loop starts from the same parameters; it says
so if they do not). Each micro-batch is the batch's own structure (a tuple, a dict or an array)
cut to some of its rows, rows along axis 0. A partial window hands the loop fewer than k.

The properties (``PropertyResult``s in an ``AccumulationReport``):

- ``loop_steps_equal_big_batch``: for every split, as a full window (k = its micro-batches) and
  as a partial one (k one more), ``windows`` optimizer steps end at the parameters of the same loop
  built with k = 1 and given the window's rows as one micro-batch; on a failure the report says what
  the first step measured (a multiple of the big batch's step: the nominal-k rule, a dropped window,
  a sum never divided; or no multiple: micro-batches weighted unequally);
- ``loop_resume_equals_uninterrupted`` (when the loop gives ``state``/``restore``): the loop stopped
  halfway, its ``state()`` restored into a freshly built loop, ends at the uninterrupted loop's
  parameters bit for bit; the fresh loop's generator is reseeded, so a random state (dropout) left
  out of ``state()`` shows.

Loops that own their iteration (a Trainer, a Lightning fit) give ``train(windows)`` instead of
``window``: the windows in order, one optimizer step each. ``framework`` says how to read the
loop's parameters; ``minitorch_accum.testing.torch`` passes PyTorch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from minitorch_accum.backend import manual_seed
from minitorch_accum.testing.check_context import check_splits, parts_of
from minitorch_accum.testing.equivalence import AccumulationReport, default_splits
from minitorch_accum.testing.parameter_bound import UNIT_ROUNDOFF, Tolerance
from minitorch_accum.testing.property_results import FAILED, AccumulationMismatch, PropertyResult
from minitorch_accum.testing.subject import inexact_layers
from minitorch_accum.testing.training_properties import displacement_tolerance

__all__ = ["MINITORCH", "Loop", "LoopFramework", "batch_rows", "check_training_loop", "take_rows"]

#: what every loop is built after: the check seeds the framework's generator with it
_SEED = 0


@dataclass
class Loop:
    """The loop under test: the model it trains, and one optimizer step over a window's micro-batches
    (``window``) or every window in order (``train``); ``state``/``restore``: what a checkpoint holds
    (model, optimizer, scheduler, random state) and loading it into a freshly built loop."""

    model: Any
    window: Callable[[list[Any]], None] | None = None
    train: Callable[[list[list[Any]]], None] | None = None
    state: Callable[[], Any] | None = None
    restore: Callable[[Any], None] | None = None

    def __post_init__(self) -> None:
        if (self.window is None) == (self.train is None):
            raise TypeError("Loop: give window(micro_batches) (one optimizer step) or train(windows) (one step per "
                            "window, in order), exactly one of them")
        if (self.state is None) != (self.restore is None):
            raise TypeError("Loop: give state() and restore(state) together (the resume check needs both)")
        for name in ("window", "train", "state", "restore"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"Loop: {name} must be a function, got {type(value).__name__}")

    @property
    def resumable(self) -> bool:
        return self.state is not None

    def run(self, windows: list[list[Any]]) -> None:
        """One optimizer step per window, in order."""
        if self.train is not None:
            self.train(windows)
            return
        for micro_batches in windows:
            self.window(micro_batches)


@dataclass(frozen=True)
class LoopFramework:
    """How the check reads a loop's model: its parameters by name (float64 copies), the reasons it
    cannot equal the big batch (training-mode BatchNorm, active dropout), its dtype, and how to seed
    the generator its layers draw from."""

    name: str
    parameters: Callable[[Any], dict[str, np.ndarray]]
    inexact: Callable[[Any], list[str]]
    dtype: Callable[[Any], str]
    seed: Callable[[int], None]


def _module_parameters(model: Any) -> dict[str, np.ndarray]:
    return {name: np.array(p.numpy(), dtype=np.float64) for name, p in model.named_parameters()}


def _module_dtype(model: Any) -> str:
    first = next(iter(model.parameters()), None)
    return "float64" if first is None else np.dtype(first.numpy().dtype).name


def _seed(seed: int) -> None:
    manual_seed(seed)


MINITORCH = LoopFramework("minitorch_accum", _module_parameters, inexact_layers, _module_dtype, _seed)


# ------------------------------------------------------------------------------ the batch
def _leaves(batch: Any) -> list[Any]:
    if isinstance(batch, dict):
        return [leaf for value in batch.values() for leaf in _leaves(value)]
    if isinstance(batch, tuple | list):
        return [leaf for value in batch for leaf in _leaves(value)]
    return [batch]


def batch_rows(batch: Any) -> int:
    """The rows of ``batch`` (a tuple, list or dict of arrays or tensors, or one of them), checked equal."""
    leaves = _leaves(batch)
    if not leaves:
        raise ValueError("batch: it holds no array")
    try:
        counts = sorted({len(leaf) for leaf in leaves})
    except TypeError:
        kinds = ", ".join(sorted({type(leaf).__name__ for leaf in leaves}))
        raise TypeError(f"batch: every part must be an array or tensor with rows along axis 0, got {kinds}") from None
    if len(counts) != 1:
        raise ValueError(f"batch: its arrays hold different numbers of rows {counts}")
    return counts[0]


def take_rows(batch: Any, rows: slice) -> Any:
    """``batch`` cut to ``rows``, in its own structure."""
    if isinstance(batch, dict):
        return {key: take_rows(value, rows) for key, value in batch.items()}
    if isinstance(batch, tuple | list):
        parts = [take_rows(value, rows) for value in batch]
        return type(batch)(*parts) if hasattr(batch, "_fields") else type(batch)(parts)
    return batch[rows]


# ----------------------------------------------------------------------------- the loops
class _Session:
    """Builds the user's loops, runs them over windows of the batch, and remembers each run."""

    def __init__(self, make_loop: Callable[[int], Any], batch: Any, framework: LoopFramework, windows: int) -> None:
        if not callable(make_loop):
            raise TypeError(f"make_loop must be a function k -> Loop, got {type(make_loop).__name__}")
        if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
            raise ValueError(f"windows must be a positive int (optimizer steps per run), got {windows!r}")
        self.make_loop, self.batch, self.framework, self.windows = make_loop, batch, framework, windows
        self.rows = batch_rows(batch)
        self.initial: dict[str, np.ndarray] | None = None
        self._runs: dict[tuple[int, tuple[int, ...], int], dict[str, np.ndarray]] = {}
        first = self.build(1)
        self.resumable = first.resumable
        self.dtype = framework.dtype(first.model)
        self.inexact = framework.inexact(first.model)

    def build(self, k: int) -> Loop:
        self.framework.seed(_SEED)
        made = self.make_loop(k)
        loop = made if isinstance(made, Loop) else _as_loop(made)
        params = self.framework.parameters(loop.model)
        if self.initial is None:
            self.initial = params
        else:
            initial = self.initial
            differ = sorted(n for n in initial if n not in params or not np.array_equal(initial[n], params[n]))
            if differ or set(params) != set(self.initial):
                raise ValueError(f"make_loop built two loops whose models differ ({', '.join(differ) or 'by name'}): "
                                 f"build every parameter from the framework's generator (the check seeds it with "
                                 f"{_SEED} before each call) or seed it inside make_loop")
        return loop

    def micro_batches(self, sizes: Sequence[int]) -> list[Any]:
        return [take_rows(self.batch, rows) for rows in parts_of(sizes)]

    def run(self, k: int, sizes: tuple[int, ...], windows: int) -> dict[str, np.ndarray]:
        """The parameters after ``windows`` steps of a loop built for k, each window the batch cut by ``sizes``."""
        key = (k, sizes, windows)
        if key not in self._runs:
            loop = self.build(k)
            try:
                loop.run([self.micro_batches(sizes) for _ in range(windows)])
            except Exception as error:
                error.add_note(f"while running the loop built for k={k} over {windows} window(s) of "
                               f"micro-batches {sizes}")
                raise
            self._runs[key] = self.framework.parameters(loop.model)
        return self._runs[key]

    def reference(self, windows: int) -> dict[str, np.ndarray]:
        """The big batch: the loop built for k = 1, each window's rows as one micro-batch."""
        return self.run(1, (self.rows,), windows)


def _as_loop(made: Any) -> Loop:
    if isinstance(made, tuple) and len(made) == 2 and callable(made[1]):
        return Loop(made[0], made[1])
    hooks = {name: getattr(made, name, None) for name in ("window", "train", "state", "restore")}
    if hasattr(made, "model") and (callable(hooks["window"]) or callable(hooks["train"])):
        return Loop(made.model, **hooks)
    raise TypeError(f"make_loop(k) must return a Loop(model, window), a pair (model, window) or an object with "
                    f".model and .window(micro_batches) or .train(windows); got {type(made).__name__}")


# ------------------------------------------------------------------------------ diagnosis
def _flat(params: dict[str, np.ndarray], initial: dict[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([(params[n] - initial[n]).ravel() for n in sorted(initial)]) if initial else np.zeros(0)


def describe_first_step(moved: np.ndarray, expected: np.ndarray, held: int, k: int, dtype: str) -> str:
    """What a loop's first step (``moved``, the parameters' displacement) is, next to the big batch's
    (``expected``), for a window holding ``held`` micro-batches of a loop built for ``k``."""
    if not np.any(expected):
        return "the big batch's first step moves no parameter: nothing to compare the loop's step with"
    if not np.any(moved):
        return (f"the loop's first window ({held} micro-batches, k={k}) moved no parameter: it took no optimizer "
                "step, the window was dropped")
    scale = float(moved @ expected / (expected @ expected))
    left = float(np.linalg.norm(moved - scale * expected) / np.linalg.norm(moved))
    if left > math.sqrt(UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["float32"])):
        return (f"the loop's first step is no multiple of the big batch's (the nearest, {scale:.4g} times, leaves "
                f"{left:.1%} of it): the loop weights its micro-batches or their rows otherwise than the big batch "
                "does (a mean of micro-batch means over unequal item counts, a clip or a decay per micro-batch?)")
    text = f"the loop's first step is {scale:.6g} times the big batch's (a uniform scale, {left:.1e} of it left over)"
    rules = [(1.0, "the first step is right: the gap grows in later steps, from state advanced per micro-batch "
                   "(a scheduler, an optimizer's step counter?)")]
    if held < k:
        rules.append((held / k, f"the nominal-k rule: the window held {held} micro-batches and each was divided by "
                                f"k = {k} as if it were full ({held}/{k}), not by what the window holds"))
    if held > 1:
        rules.append((float(held), f"the {held} micro-batches' gradients were summed and never divided"))
    for value, rule in rules:
        if abs(scale - value) <= 1e-3 * value:
            return f"{text}: {rule}"
    return text


# ---------------------------------------------------------------------------- properties
def loop_steps_equal_big_batch(session: _Session, splits: tuple[tuple[int, ...], ...],
                               partial: bool = True) -> PropertyResult:
    """Every split as a full and (``partial``) as a partial window, ``windows`` steps, against the big
    batch's steps."""
    windows = session.windows
    result = PropertyResult("loop_steps_equal_big_batch",
                            f"the loop with k micro-batches per step ends, after {windows} steps, where it ends "
                            "with one micro-batch of the same rows per step")
    expected = session.reference(windows)
    tolerance = displacement_tolerance(session.initial, expected, session.dtype, windows)
    scenarios: dict[str, tuple[tuple[int, ...], int]] = {}
    for sizes in splits:
        for k, kind in ((len(sizes), "a full window"), (len(sizes) + 1, "a partial window"))[:2 if partial else 1]:
            if k == 1:
                continue  # one micro-batch in a loop built for one: the big batch itself
            scenario = f"split {sizes} in {kind} (k={k}), {windows} step(s)"
            scenarios[scenario] = (sizes, k)
            result.compare(session.run(k, sizes, windows), expected, tolerance, scenario)
    result.settle(session.inexact)
    if result.status == FAILED:
        sizes, k = scenarios[result.worst_parameter()[1].scenario]
        moved = _flat(session.run(k, sizes, 1), session.initial)
        result.notes.append(f"with {result.worst_parameter()[1].scenario}: "
                            + describe_first_step(moved, _flat(session.reference(1), session.initial), len(sizes), k,
                                                  session.dtype))
    return result


def loop_resume_equals_uninterrupted(session: _Session, splits: tuple[tuple[int, ...], ...]) -> PropertyResult:
    """Stopped after half the steps, its ``state()`` restored into a fresh loop, the loop ends bit for bit
    where the uninterrupted loop ends."""
    windows = max(2, session.windows)
    stop = windows // 2
    result = PropertyResult("loop_resume_equals_uninterrupted",
                            "the loop's state() restored into a freshly built loop ends where the uninterrupted "
                            "loop ends, bit for bit")
    sizes = max(splits, key=lambda s: (len(set(s)) > 1, len(s)))
    k = len(sizes)
    whole = session.run(k, sizes, windows)
    first = session.build(k)
    first.run([session.micro_batches(sizes) for _ in range(stop)])
    state = first.state()
    resumed = session.build(k)  # the generator reseeded: only state() can bring back where the first one was
    resumed.restore(state)
    resumed.run([session.micro_batches(sizes) for _ in range(windows - stop)])
    exact = Tolerance({name: np.zeros(()) for name in whole},
                      "bit-identical: the state holds everything the remaining steps read (parameters, optimizer and "
                      "scheduler state, random state) and they run the same arithmetic")
    result.compare(session.framework.parameters(resumed.model), whole, exact,
                   f"split {sizes} (k={k}), stopped after {stop} of {windows} steps and resumed in a fresh loop")
    result.settle()
    if result.status == FAILED and session.inexact:
        result.notes.append("the model draws random numbers (" + "; ".join(session.inexact)
                            + "): does state() hold the generator's state, and restore() set it?")
    return result


def check_training_loop(make_loop: Callable[[int], Any], batch: Any, *,
                        splits: Sequence[int] | Sequence[Sequence[int]] | None = None, windows: int = 3,
                        partial: bool = True, framework: LoopFramework | None = None,
                        raise_on_failure: bool = True) -> AccumulationReport:
    """Check the loop ``make_loop(k)`` builds against itself on the big batch (see the module docstring).

    ``batch``: every row a window trains on (a tuple, list or dict of arrays or tensors, rows along
    axis 0); ``splits``: the micro-batch sizes of a window, one split or several (None: drawn as for
    ``check_accumulation``); ``windows``: optimizer steps per run; ``partial=False`` leaves out the
    partial windows (a loop that never gets one: it drops them); ``framework``: how to read the
    loop's model (minitorch_accum's by default). Raises ``AccumulationMismatch`` for the first failed
    property (the diagnosis in its notes) unless ``raise_on_failure`` is False."""
    session = _Session(make_loop, batch, framework or MINITORCH, windows)
    chosen = check_splits(splits, session.rows) if splits is not None else default_splits(session.rows, drawn=2)
    results = [loop_steps_equal_big_batch(session, chosen, partial)]
    notes = list(results[0].notes)
    if session.resumable:
        results.append(loop_resume_equals_uninterrupted(session, chosen))
    else:
        notes.append("resume not checked: the loop gives no state()/restore()")
    report = AccumulationReport(results, chosen, session.dtype, list(dict.fromkeys(notes)))
    if raise_on_failure and report.failures:
        error = AccumulationMismatch(report.failures[0])
        for note in report.failures[0].notes:
            error.add_note(note)
        if len(report.failures) > 1:
            error.add_note("also failed: " + "; ".join(r.summary() for r in report.failures[1:]))
        raise error
    return report

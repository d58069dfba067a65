"""The Accumulator: k micro-batches, one window, one optimizer step.

    acc = Accumulator(model, steps=8, reduction="items")
    for xb, yb in micro_batches:
        acc.backward(F.cross_entropy(model(xb), yb, reduction="sum"), num_items=len(yb))
    model = opt.step(model, acc)      # normalization folded into the fused step
    acc.zero()                        # next window: no memset, the first write copies

Raw micro-batch gradients are summed into a persistent GradArena (or, with
``fusion="none"``, into Burn-style Gradients containers); the window's normalization
(1/k, 1/N_items or none), any loss-scale unscale and any clipping factor are one
scale applied at the end, by the optimizer's fused kernel or by ``grads()``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from minitorch_accum.accum import normalization
from minitorch_accum.accum.arena import GradArena
from minitorch_accum.accum.arena_store import ArenaStore
from minitorch_accum.accum.backward_checks import check_backward, check_whole
from minitorch_accum.accum.container_store import ContainerStore
from minitorch_accum.accum.gradient_store import GradientStore
from minitorch_accum.accum.loss_scaler import DynamicLossScaler
from minitorch_accum.accum.window import Window
from minitorch_accum.accum.window_reducer import WindowReducer
from minitorch_accum.autodiff import Gradients, InPlaceModificationError, Replay, ReplayReport, Tensor
from minitorch_accum.backend import resolve_dtype
from minitorch_accum.backend.device import Device
from minitorch_accum.kernels.arrays import Array  # a NumPy or a CuPy array: Any to mypy (CuPy has no types)
from minitorch_accum.nn import Module
from minitorch_accum.observe.memory import MemoryReport, PeakMemory, array_bytes
from minitorch_accum.observe.trace import AccumulationTrace
from minitorch_accum.observe.watched_writes import watched_writes
from minitorch_accum.observe.window_tracer import WindowTracer
from minitorch_accum.optim import GradientWindow

__all__ = ["FUSIONS", "Accumulator"]

#: the choices of ``Accumulator(fusion=...)``: where a micro-batch's gradients go (see its Args)
FUSIONS = ("leaf", "gemm", "none")


def _check_steps(steps: object) -> int:
    if not isinstance(steps, int | np.integer) or isinstance(steps, bool) or steps <= 0:
        raise ValueError(f"steps (k, the micro-batches per window) must be a positive int, got {steps!r}")
    return int(steps)


class Accumulator:
    """Gradient accumulation over windows of ``steps`` micro-batches.

    Args:
        model: the module whose parameters receive gradients.
        steps: k, the number of micro-batches per optimizer step.
        reduction: ``"items"`` (default; each backward gets a summed loss and its
            ``num_items``; exact for micro-batches of any size), ``"mean"`` (divide by
            the micro-batches accumulated), ``"mean_nominal"`` (divide by ``steps``, even
            when a partial window holds fewer: Lightning's rule) or ``"sum"``.
        fusion: ``"gemm"`` (default: a matmul's weight gradient is written by the GEMM
            itself, beta = 1, every other gradient as with ``"leaf"``), ``"leaf"`` (fused
            kernels write each leaf gradient into the arena) or ``"none"`` (Burn's path:
            containers summed).
        accum_dtype: ``"float32"``, ``"float64"`` or ``"bfloat16"``; 16-bit gradients accumulate in
            float32 unless the arena is bfloat16 (half the bytes; each sum rounded back).
        rounding: how a bfloat16 arena rounds each sum: ``"nearest"`` or ``"stochastic"`` (up with
            probability equal to the discarded fraction, so the window's sum is exact in
            expectation; the random bits keyed by ``rounding_seed``, the window, the micro-batch and
            the element, so a run is reproducible and resumes bit for bit).
        rounding_seed: the seed of the stochastic rounding's stream (an int in [0, 2^64)).
        compensated: Neumaier-compensated accumulation with a second arena.
        loss_scaler: a DynamicLossScaler for 16-bit training (optional).
        trace: record the window in ``self.trace``: ``True``, an AccumulationTrace (one with
            ``memory=`` records the array allocations too), or a path, where the trace is
            written in the Trace Event Format (ui.perfetto.dev) at the end of every window
            (for a long run, pass True and call ``acc.trace.save_chrome(path)`` once).
        reducer: data parallelism (``minitorch_accum.distributed``): when the window closes it
            is summed over every rank, and normalized by the items of every rank.

    The gradients themselves live in ``self.store`` (an ArenaStore, or a ContainerStore
    for ``fusion="none"``); the Accumulator keeps the window, one value (``self.window``,
    a ``Window``): how many micro-batches and items it holds, and once closed the scale
    that normalizes it and whether it may step. Observation is asked for here (``trace``,
    ``micro_batch()``) and done in ``minitorch_accum.observe``.
    """

    def __init__(self, model: Module, steps: int, reduction: str = "items", fusion: str = "gemm",
                 accum_dtype: npt.DTypeLike = "float32", compensated: bool = False,
                 loss_scaler: DynamicLossScaler | None = None,
                 trace: bool | AccumulationTrace | str | os.PathLike[str] = False,
                 reducer: WindowReducer | None = None, rounding: str = "nearest", rounding_seed: int = 0) -> None:
        if not isinstance(model, Module):
            raise TypeError(f"Accumulator: model must be a Module, got {type(model).__name__}")
        self.model = model
        self.steps = _check_steps(steps)
        self.reduction = normalization.check_reduction(reduction)
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        if fusion == "none" and compensated:
            raise ValueError("compensated accumulation needs an arena: use fusion='leaf' or 'gemm'")
        if fusion == "none" and reducer is not None:
            raise ValueError("data-parallel accumulation reduces the gradient arena: use fusion='leaf' or 'gemm'")
        bfloat16 = resolve_dtype(accum_dtype).name == "bfloat16"
        if fusion == "none" and (bfloat16 or rounding != "nearest"):
            raise ValueError("a bfloat16 arena (and its rounding) needs an arena: use fusion='leaf' or 'gemm'")
        if bfloat16 and reducer is not None:
            raise ValueError("data-parallel accumulation into a bfloat16 arena is not supported: the collective would "
                             "sum the ranks' bfloat16 buffers rounded to nearest; accumulate in float32")
        self.fusion = fusion
        self.compensated = compensated
        self.loss_scaler = loss_scaler
        named = list(model.named_parameters())
        if not named:
            raise ValueError("Accumulator: the model has no parameters")
        self._first_param = named[0][1]
        self.reducer = reducer
        self.store: GradientStore = (
            ContainerStore(named) if fusion == "none"
            else ArenaStore(named, accum_dtype, compensated=compensated, fuse_gemm=fusion == "gemm",
                            shards=1 if reducer is None else reducer.shards, rounding=rounding,
                            rounding_seed=rounding_seed, window_index=lambda: self.window.index))
        #: the window being accumulated: its index, micro-batches and items, its scale once closed
        self.window = Window()
        self._tracer: WindowTracer | None = None
        path = trace if isinstance(trace, str | os.PathLike) else None
        if isinstance(trace, AccumulationTrace) or trace is True or path is not None:
            self._tracer = WindowTracer(trace if isinstance(trace, AccumulationTrace) else AccumulationTrace(),
                                        self, path)
            self.store.recorder = self._tracer
        elif trace not in (False, None):
            raise TypeError(f"trace must be a bool, an AccumulationTrace or a path, got {type(trace).__name__}")
        self.skipped_windows: list[int] = []
        self.activation_peaks: list[int] = []
        #: how the forward of the micro-batch about to be backpropagated ran, when a replay made by
        #: ``capture`` made it (its ReplayReport's outcome; the trace's forward and backward spans say it)
        self.forward_replay: str | None = None

    # --------------------------------------------------------------- backward
    def backward(self, loss: Tensor, num_items: int | None = None, closes_window: bool | None = None, *,
                 allow_mean_loss: bool = False) -> None:
        """Backpropagate one micro-batch's loss and fold its gradients into the window.

        With ``reduction="items"`` the loss must be summed over the micro-batch's items
        and ``num_items`` must say how many there were; a loss that is already a mean is
        refused (MeanLossError: it would be divided twice) unless ``allow_mean_loss``.
        ``closes_window``: this is the window's last micro-batch (default: when it makes
        ``steps``); a data-parallel reducer may start reducing during it. An input the
        forward saved and that was changed in place since is refused before anything is
        written (InPlaceModificationError, naming the op and the parameter).
        """
        check_backward(self.window, self.steps, self.reduction, self.store.poisoned, loss, num_items, allow_mean_loss)
        seed, scale = _seed(loss, self.loss_scaler)
        if self.reducer is not None and (closes_window or (closes_window is None
                                                           and self.window.micro_batches + 1 == self.steps)):
            assert isinstance(self.store, ArenaStore)
            self.reducer.window_closing(self.store)
        try:
            with self._span("backward"), _naming_the_parameter(self.model):
                self.store.micro_batch(loss, seed, scale, watched_writes(self.store, self._tracer))
        finally:
            self.forward_replay = None
        self.window = self.window.with_micro_batch(int(num_items or 0))

    def capture(self, fn: Callable[..., Any], *, enabled: bool = True,
                listener: Callable[[ReplayReport], None] | None = None) -> Replay:
        """``fn``, one micro-batch's forward over this accumulator's model (tensors and arrays in, its
        loss and other tensors out), captured on its first calls and replayed after them without
        the model's Python (``minitorch_accum.autodiff.Replay``); the trace says how each ran::

            step = acc.capture(lambda x, y: F.cross_entropy(model(x), y, reduction="sum"))
            for x, y in micro_batches:
                acc.backward(step(x, y), num_items=F.count_items(y))
        """

        def heard(report: ReplayReport) -> None:
            self.forward_replay = report.outcome
            if listener is not None:
                listener(report)

        return Replay(fn, self.model, enabled=enabled, listener=heard)

    @contextlib.contextmanager
    def micro_batch(self) -> Iterator[PeakMemory]:
        """Measure the peak memory of one micro-batch's forward and backward: the activation
        arrays (saved activations and temporaries) are appended to ``activation_peaks``; the
        probe also has the Python objects apart (``other_bytes``):

            with acc.micro_batch():
                acc.backward(loss_fn(model(xb), yb), num_items=len(yb))
        """
        with self._span("micro_batch"), PeakMemory(self.device()) as probe:
            yield probe
        arrays = probe.array_peak_bytes
        self.activation_peaks.append(probe.peak_bytes if arrays is None else arrays)

    # ------------------------------------------------------------ the window
    @property
    def micro_step(self) -> int:
        """Micro-batches accumulated in the current window."""
        return self.window.micro_batches

    @property
    def items_seen(self) -> int:
        """Items (``num_items`` summed) in the current window."""
        return self.window.items

    @property
    def window_index(self) -> int:
        """The current window's number (0 first)."""
        return self.window.index

    @property
    def is_boundary(self) -> bool:
        """True when the window holds ``steps`` micro-batches: time to step the optimizer."""
        return self.window.micro_batches >= self.steps

    @property
    def arena(self) -> GradArena | None:
        """The persistent gradient arena (None on Burn's container path, ``fusion="none"``)."""
        return getattr(self.store, "arena", None)

    def set_steps(self, steps: int) -> None:
        """Change k between windows (an accumulation schedule)."""
        if self.window.micro_batches:
            raise RuntimeError("set_steps: the current window is not empty; change k after acc.zero()")
        self.steps = _check_steps(steps)

    def device(self) -> Device:
        return self._first_param.device

    # ----------------------------------------------------------- window end
    def window_scale(self) -> float:
        """Close the window (no more micro-batches) and return the factor that normalizes it.

        With a reducer this is where the window is summed over every rank: the micro-batches
        and items counted are then those of all ranks."""
        check_whole("the optimizer step", self.store.poisoned)
        if not self.window.closed:
            with self._span("close"):
                micro_batches, items = self.window.micro_batches, self.window.items
                if self.reducer is not None:
                    assert isinstance(self.store, ArenaStore)
                    with self._span("reduction"):
                        micro_batches, items = self.reducer.reduce(self.store, micro_batches, items)
                # mean_nominal divides by the configured k of every rank (a rank's k times the ranks)
                nominal = self.steps * (1 if self.reducer is None else self.reducer.shards)
                with self._span("normalization", self.reduction):
                    scale = normalization.window_scale(self.reduction, micro_batches, items, nominal)
                    self.store.close()
            self.window = self.window.closed_with(scale)
        assert self.window.scale is not None
        return self.window.scale

    def found_nonfinite(self) -> bool:
        """True when any gradient of this window was inf or nan (the step must be skipped).

        Closes the window, since the answer must cover every micro-batch of it."""
        if self.window.nonfinite is None:
            self.window_scale()
            # a reducer is refused with fusion="none" (__init__), so its store is an ArenaStore
            finite = (self.store.finite_check() if self.reducer is None
                      else self.reducer.finite_check(cast(ArenaStore, self.store)))
            self.window = self.window.found(not finite)
        assert self.window.nonfinite is not None
        return self.window.nonfinite

    def gradient_window(self) -> GradientWindow:
        """The window for an optimizer: raw sums plus the one factor that normalizes them."""
        if self.reducer is not None and self.reducer.sharded:
            raise TypeError("gradient_window: with ZeRO-1 each rank holds only its shard of the gradient; step "
                            "with minitorch_accum.distributed.ZeroRedundancyOptimizer")
        scale = self.window_scale()
        skip = self.found_nonfinite()
        # a traced window's tracer also hears the step's fused launch, and the scale it folds in
        return GradientWindow({id(p): g for p, g in self.store.views()}, grad_scale=scale, skip=skip,
                              recorder=self._tracer)

    def grads(self) -> Gradients:
        """The window's normalized gradients, as views into the store (scaled in place).

        Closes the window: call ``zero()`` before the next micro-batch."""
        scale = self.window_scale()
        if self.reducer is not None:
            assert isinstance(self.store, ArenaStore)
            self.reducer.complete(self.store)
        if scale != 1.0:
            self.store.scale_in_place(scale)
            self.window = self.window.closed_with(1.0)
        return Gradients({id(p): (p, g) for p, g in self.store.views()})

    def grad_norm(self) -> float:
        """Global L2 norm of the window's normalized gradient (one multi-tensor norm)."""
        scale = self.window_scale()
        raw = self.store.norm() if self.reducer is None else self.reducer.norm(cast(ArenaStore, self.store))
        return raw * abs(scale)

    def scale_window(self, factor: float) -> None:
        """Multiply the window's gradient by ``factor`` (clipping), folded into the final scale."""
        self.window = self.window.closed_with(self.window_scale() * factor)

    def zero(self) -> None:
        """Start a new window. No memset: the next write to each view copies instead of adds."""
        # a data-parallel rank with no micro-batch in the last window still closed it with the
        # others, and must update its loss scale as they do
        if (self.window.micro_batches or self.window.closed) and not self.store.poisoned:
            nonfinite = self.found_nonfinite()
            if nonfinite:
                self.skipped_windows.append(self.window.index)
            if self.loss_scaler is not None:
                self.loss_scaler.update(nonfinite, self.window.index)
        if self._tracer is not None:
            self._tracer.window_ended()
        self.store.reset()
        self.window = self.window.next()

    # ------------------------------------------------------------ observation
    @property
    def trace(self) -> AccumulationTrace | None:
        """The trace (None when not tracing); assign one to start tracing, None to stop."""
        return None if self._tracer is None else self._tracer.trace

    @trace.setter
    def trace(self, trace: AccumulationTrace | None) -> None:
        self._tracer = None if trace is None else WindowTracer(trace, self)
        self.store.recorder = self._tracer

    def _span(self, phase: str, *args: object) -> contextlib.AbstractContextManager[None]:
        # a phase of the window as a span of the trace; nothing when not tracing
        return contextlib.nullcontext() if self._tracer is None else getattr(self._tracer, phase)(*args)

    def memory_report(self, optimizer: object = None) -> MemoryReport:
        """Parameters, gradient store, optimizer state and the last micro-batch's activation peak, in bytes."""
        return MemoryReport(
            parameters=sum(int(p.data.nbytes) for p in self.model.parameters()),
            arena=self.store.nbytes,
            optimizer_state=array_bytes(getattr(optimizer, "state", {})),
            activations=self.activation_peaks[-1] if self.activation_peaks else 0,
        )

    # ----------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume mid-window: the window's counters and loss scale,
        and the store's sums and facts."""
        if self.window.closed:
            raise RuntimeError("state_dict: the window is closed; save before grads()/the step, or after zero()")
        check_whole("state_dict", self.store.poisoned)
        window = self.window
        meta = {
            "steps": self.steps, "reduction": self.reduction, "fusion": self.fusion,
            "micro_step": window.micro_batches, "items": window.items, "window_index": window.index,
            "skipped_windows": list(self.skipped_windows),
            "loss_scaler": None if self.loss_scaler is None else self.loss_scaler.state_dict(),
            "store": self.store.state_meta(),
        }
        # between windows the store holds nothing to resume (the next write copies over it)
        return {"meta": meta, "arrays": self.store.state_arrays() if window.micro_batches else {}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` output into this accumulator (same model layout)."""
        try:
            meta, arrays = state["meta"], state["arrays"]
            saved_fusion = meta["fusion"]
            if (saved_fusion == "none") != (self.fusion == "none"):
                raise ValueError(f"accumulator state was saved with fusion={saved_fusion!r}, this one uses "
                                 f"{self.fusion!r}")
            # every figure is read and checked before the store loads: a state refused here leaves the
            # accumulator as it was (a store loaded under a window left as it was would add the next
            # micro-batch to the saved sums)
            micro_step = int(meta["micro_step"])
            window = Window(int(meta["window_index"]), micro_step, int(meta["items"]))
            steps = _check_steps(meta["steps"])
            reduction = normalization.check_reduction(meta["reduction"])
            skipped_windows = [int(w) for w in meta["skipped_windows"]]
            if micro_step:
                self.store.load(meta["store"], arrays)
            else:
                self.store.reset()
            self.steps, self.reduction, self.window, self.skipped_windows = steps, reduction, window, skipped_windows
            if self.loss_scaler is not None and meta["loss_scaler"]:
                self.loss_scaler.load_state_dict(meta["loss_scaler"])
        except KeyError as missing:
            raise ValueError(f"accumulator state is incomplete: it has no {missing}") from None

    def __repr__(self) -> str:
        return (f"Accumulator(steps={self.steps}, reduction={self.reduction!r}, fusion={self.fusion!r}, "
                f"micro_step={self.window.micro_batches}, items_seen={self.window.items}, "
                f"store={type(self.store).__name__}, {self.store.nbytes} bytes)")


def _seed(loss: Tensor, scaler: DynamicLossScaler | None) -> tuple[Array | None, float]:
    """Backward's seed (None: ones) and the scale each gradient is written with: with a loss
    scaler the seed is the scale, and the gradients are unscaled as they land."""
    if scaler is None:
        return None, 1.0
    factor = scaler.scale
    # a scale beyond the loss dtype's range (2^16 > float16's 65504) becomes inf here,
    # which marks the window and lowers the scale, as any overflow would
    with np.errstate(over="ignore"):
        seed = loss.backend.xp.full(loss.data.shape, factor, dtype=loss.dtype)
    return seed, 1.0 / factor


@contextlib.contextmanager
def _naming_the_parameter(model: Module) -> Iterator[None]:
    """An InPlaceModificationError raised inside names the model's parameter it is about."""
    try:
        yield
    except InPlaceModificationError as error:
        names = {id(p): n for n, p in model.named_parameters()}
        raise error.naming(names[id(error.source)]) if id(error.source) in names else error from None

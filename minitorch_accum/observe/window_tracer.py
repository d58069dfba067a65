"""What an Accumulator records in its trace: the spans of each window and every kernel in them.

Per window (lanes of ``observe.trace_events.LANES``): ``micro-batch i`` (with ``acc.micro_batch()``), its
``forward`` (from the micro-batch's start to its backward) and ``backward``, both with ``replay`` (how
the forward ran: captured, checked, replayed, eager) when ``acc.capture`` made it; every kernel that
wrote or read the arena, with its path; the ``close`` (the reduction over the ranks with each
bucket's collective, the normalization); the fused optimizer step's launch over the window's
sums with the scale it folds in (``acc.gradient_window()`` hands the optimizer this tracer); the
window itself as ``ProfilerStep#N`` when ``zero()`` starts the next one. The Learner adds its
own spans (forward, the optimizer step).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from minitorch_accum.kernels import bytes_moved
from minitorch_accum.observe.trace import AccumulationTrace
from minitorch_accum.observe.trace_events import COLLECTIVES, KernelEvent, kernel_path_of

__all__ = ["WindowTracer"]


def _communicator_name(reducer: Any) -> str:
    comm = getattr(reducer, "comm", None)
    return "" if comm is None else type(comm).__name__.removesuffix("Communicator").lower() or "local"


class WindowTracer:
    """The recorder an Accumulator hands its store, and the spans it opens; ``path``: the
    Chrome trace is written there at the end of every window.

    It reads the accumulator, never imports it: ``window`` (its index and micro-batches),
    ``steps``, ``store``, ``model``, ``reducer``, ``device()``, ``forward_replay``."""

    def __init__(self, trace: AccumulationTrace, accumulator: Any, path: str | os.PathLike | None = None) -> None:
        self.trace = trace
        self.accumulator = accumulator
        self.path = None if path is None else Path(path)
        device = accumulator.device()
        self.device_kind = getattr(device, "kind", "cpu")
        self.communicator = _communicator_name(accumulator.reducer)
        self._micro_started: float | None = None
        self._window_started: float | None = None
        self._spans_before_window = len(trace.spans)
        store = accumulator.store
        trace.count("arena bytes", store.nbytes)
        if trace.memory is not None:
            trace.memory.device = self.device_kind
            holders = (("gradient arena", getattr(store, "arena", None)),
                       ("compensation arena", getattr(store, "compensation", None)))
            for role, holder in holders:
                for dtype, buffer in ({} if holder is None else holder.buffers).items():
                    trace.memory.name_persistent(buffer, f"{role} ({dtype}, persistent)")
            for name, param in accumulator.model.named_parameters():
                trace.memory.name_persistent(param.data, f"parameter {name}")

    # ------------------------------------------------------------------ the recorder
    def __call__(self, param: str, kernel: str, elements: int, nbytes: int, seconds: float, *,
                 materialized: bool, window_pass: bool, started: float | None = None,
                 scale: float | None = None) -> None:
        window = self.accumulator.window
        started = time.perf_counter() - seconds if started is None else started
        self._window_begins(started)
        self.trace.record(KernelEvent(window.index, -1 if window_pass else window.micro_batches, param, kernel,
                                      int(elements), int(nbytes), seconds, materialized, self.trace.clock(started),
                                      kernel_path_of(kernel, self.device_kind, self.communicator), scale))

    @contextlib.contextmanager
    def timed(self, work: Sequence[tuple[str, str, Any]], *, window_pass: bool) -> Iterator[None]:
        """The block runs ``work`` (each a parameter's name, the kernel, its array) as one pass:
        it is timed, and each piece recorded with its share of the time by elements, the shares
        laid end to end. A window pass reads or writes the window's sums; otherwise each piece is
        a micro-batch's contribution, an array of its own (Burn's container adds)."""
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        total = sum(array.size for _, _, array in work) or 1
        for param, kernel, array in work:
            share = seconds * array.size / total
            size = array.dtype.itemsize
            self(param, kernel, array.size, bytes_moved(kernel, array.size, size, size), share,
                 materialized=not window_pass, window_pass=window_pass, started=started)
            started += share

    @contextlib.contextmanager
    def launch(self, kernel: str, work: Sequence[tuple[str, Any]], *, scale: float) -> Iterator[None]:
        """The block is one launch of a fused optimizer step over ``work`` (each a parameter's name
        and the gradient array it reads), which multiplies the gradients by ``scale``: one event,
        as the kernel ran, naming the parameters; its bytes are those of every array it covers."""
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        moved = sum(bytes_moved(kernel, array.size, array.dtype.itemsize, array.dtype.itemsize) for _, array in work)
        self(", ".join(name for name, _ in work), kernel, sum(array.size for _, array in work), moved, seconds,
             materialized=False, window_pass=True, started=started, scale=scale)

    def _window_begins(self, at: float) -> None:
        if self._window_started is None:
            self._window_started = at

    # ------------------------------------------------------------------------ spans
    def _span(self, name: str, lane: str, **args: Any) -> contextlib.AbstractContextManager:
        return self.trace.span(name, lane, window=self.accumulator.window.index, **args)

    @contextlib.contextmanager
    def micro_batch(self) -> Iterator[None]:
        index = self.accumulator.window.micro_batches
        self._micro_started = started = time.perf_counter()
        self._window_begins(started)
        try:
            # from the same instant as its forward, which would otherwise start before the span holding it
            with self._span(f"micro-batch {index}", "micro-batches", started=started, micro_batch=index):
                self.trace.set_phase("forward")
                yield
        finally:
            self._micro_started = None
            self.trace.set_phase("")

    @contextlib.contextmanager
    def backward(self) -> Iterator[None]:
        window = self.accumulator.window
        now = time.perf_counter()
        self._window_begins(now)
        self.trace.set_phase("")
        # how the forward ran when a replay of the accumulator's made it (Accumulator.capture)
        replay = {} if self.accumulator.forward_replay is None else {"replay": self.accumulator.forward_replay}
        if self._micro_started is not None:  # the forward ran inside acc.micro_batch(), before this
            self.trace.add_span("forward", "micro-batches", self._micro_started, now, window=window.index,
                                micro_batch=window.micro_batches, **replay)
        with self._span("backward", "micro-batches", started=now, micro_batch=window.micro_batches, **replay):
            yield

    def close(self) -> contextlib.AbstractContextManager:
        return self._span("close", "window", micro_batches=self.accumulator.window.micro_batches)

    @contextlib.contextmanager
    def reduction(self) -> Iterator[None]:
        first, started = len(self.trace.events), time.perf_counter()
        # the span opens at the instant the collectives are laid out from: taking a second clock
        # reading for it would let the first bucket start before the span that holds it
        with self._span("reduce over ranks", "window", started=started, communicator=self.communicator):
            yield
        collectives = [e for e in self.trace.events[first:] if e.kernel in COLLECTIVES]
        if collectives:
            self.trace.lay_out_collectives(first, started)

    def normalization(self, reduction: str) -> contextlib.AbstractContextManager:
        return self._span("normalization", "window", reduction=reduction)

    def window_ended(self) -> None:
        """``zero()``: the window that ends now becomes one ``ProfilerStep#N`` span."""
        started, self._window_started = self._window_started, None
        spans = self.trace.spans[self._spans_before_window:]
        if started is not None:
            # the window began with the first thing recorded in it (the Learner's forward, say)
            started = min([started, *(self.trace.origin + span.start for span in spans)])
            window = self.accumulator.window
            self.trace.add_span(f"ProfilerStep#{window.index}", "window", started, window=window.index,
                                micro_batches=window.micro_batches, items=window.items, k=self.accumulator.steps)
        self._spans_before_window = len(self.trace.spans)
        if self.path is not None:
            self.trace.save_chrome(self.path)

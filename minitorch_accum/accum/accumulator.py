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
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from minitorch_accum import kernels
from minitorch_accum.accum.arena import GradArena
from minitorch_accum.accum.gradients_accumulator import GradientsAccumulator
from minitorch_accum.accum.loss_scaler import DynamicLossScaler
from minitorch_accum.accum.memory import MemoryReport, PeakMemory, array_bytes
from minitorch_accum.accum.reduction import check_reduction, window_scale
from minitorch_accum.accum.sink import ArenaSink
from minitorch_accum.accum.trace import AccumulationTrace, KernelEvent, kernel_bytes
from minitorch_accum.autodiff import Gradients, Tensor, run_backward
from minitorch_accum.nn import Module, Param
from minitorch_accum.optim import GradientWindow

__all__ = ["FUSIONS", "Accumulator"]

FUSIONS = ("leaf", "gemm", "none")


def _check_steps(steps: Any) -> int:
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
            the micro-batches accumulated) or ``"sum"``.
        fusion: ``"gemm"`` (default: a matmul's weight gradient is written by the GEMM
            itself, beta = 1, every other gradient as with ``"leaf"``), ``"leaf"`` (fused
            kernels write each leaf gradient into the arena) or ``"none"`` (Burn's path:
            containers summed).
        accum_dtype: ``"float32"`` or ``"float64"``; 16-bit gradients accumulate in float32.
        compensated: Neumaier-compensated accumulation with a second arena.
        loss_scaler: a DynamicLossScaler for 16-bit training (optional).
        trace: record every kernel in ``self.trace``.
    """

    def __init__(self, model: Module, steps: int, reduction: str = "items", fusion: str = "gemm",
                 accum_dtype: Any = "float32", compensated: bool = False,
                 loss_scaler: DynamicLossScaler | None = None, trace: bool = False) -> None:
        if not isinstance(model, Module):
            raise TypeError(f"Accumulator: model must be a Module, got {type(model).__name__}")
        self.model = model
        self.steps = _check_steps(steps)
        self.reduction = check_reduction(reduction)
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        if fusion == "none" and compensated:
            raise ValueError("compensated accumulation needs an arena: use fusion='leaf' or 'gemm'")
        self.fusion = fusion
        self.compensated = compensated
        self.loss_scaler = loss_scaler
        self.trace: AccumulationTrace | None = AccumulationTrace() if trace else None
        named = list(model.named_parameters())
        self._names = {id(p): n for n, p in named}
        self._params = [p for _, p in named]
        if fusion == "none":
            self.arena: GradArena | None = None
            self.container = GradientsAccumulator()
        else:
            self.arena = GradArena(named, accum_dtype)
        self.compensation = self.arena.like() if compensated and self.arena is not None else None
        self.flag = kernels.new_flag(self.arena.buffers[next(iter(self.arena.buffers))]
                                     if self.arena is not None else self._params[0].data)
        self.window_index = 0
        self.skipped_windows: list[int] = []
        self.activation_peaks: list[int] = []
        self._reset_window()

    def _reset_window(self) -> None:
        self._micro_step = 0
        self._items = 0
        self._written: set[int] = set()
        self._gemm_bound: dict[int, float] = {}  # param id -> bound on |entries| of its GEMM-written view
        self._finalized = False
        self._pending_scale: float | None = None
        self._nonfinite: bool | None = None
        self._window: Gradients | None = None

    # ------------------------------------------------------------ window state
    @property
    def micro_step(self) -> int:
        """Micro-batches accumulated in the current window."""
        return self._micro_step

    @property
    def items_seen(self) -> int:
        """Items (``num_items`` summed) in the current window."""
        return self._items

    @property
    def is_boundary(self) -> bool:
        """True when the window holds ``steps`` micro-batches: time to step the optimizer."""
        return self._micro_step >= self.steps

    def set_steps(self, steps: int) -> None:
        """Change k between windows (an accumulation schedule)."""
        if self._micro_step:
            raise RuntimeError("set_steps: the current window is not empty; change k after acc.zero()")
        self.steps = _check_steps(steps)

    def device(self) -> Any:
        return self._params[0].device

    # --------------------------------------------------------------- backward
    def backward(self, loss: Tensor, num_items: int | None = None) -> None:
        """Backpropagate one micro-batch's loss and fold its gradients into the window.

        With ``reduction="items"`` the loss must be summed over the micro-batch's items
        and ``num_items`` must say how many there were.
        """
        if self._finalized:
            raise RuntimeError("backward: this window was closed by grads()/an optimizer step; call acc.zero() first")
        if self._micro_step >= self.steps:
            raise RuntimeError(f"backward: the window already holds steps={self.steps} micro-batches; "
                               "step the optimizer and call acc.zero()")
        if not isinstance(loss, Tensor) or loss.size != 1:
            raise ValueError(f"backward: loss must be a one-element Tensor, got "
                             f"{type(loss).__name__}{getattr(loss, 'shape', '')}")
        if num_items is None:
            if self.reduction == "items":
                raise ValueError("backward: reduction='items' needs num_items= (how many items the summed loss "
                                 "covers); use reduction='mean' for losses that are already means")
        elif isinstance(num_items, bool) or not isinstance(num_items, int | np.integer) or num_items < 0:
            raise ValueError(f"backward: num_items must be a non-negative int, got {num_items!r}")
        seed = None
        scale = 1.0
        if self.loss_scaler is not None:
            factor = self.loss_scaler.scale
            # a scale beyond the loss dtype's range (2^16 > float16's 65504) becomes inf here,
            # which marks the window and lowers the scale, as any overflow would
            with np.errstate(over="ignore"):
                seed = loss._backend.xp.full(loss.data.shape, factor, dtype=loss.dtype)
            scale = 1.0 / factor
        if self.fusion == "none":
            self._backward_containers(loss, seed, scale)
        else:
            run_backward(loss, seed, sink=ArenaSink(self, scale))
        self._micro_step += 1
        self._items += int(num_items or 0)

    def _backward_containers(self, loss: Tensor, seed: Any, scale: float) -> None:
        grads = run_backward(loss, seed)
        assert grads is not None
        if scale != 1.0:
            for param, grad in grads.items():
                grads.set(param, grad * grad.dtype.type(scale))
        before = self.container.peek()
        start = time.perf_counter()
        self.container.accumulate(self.model, grads)
        if self.trace is not None:
            seconds = time.perf_counter() - start
            total = sum(p.size for p in self._params if p in grads) or 1
            for param, grad in grads.items():
                if id(param) not in self._names:
                    continue
                kind = "container-add" if before is not None and param in before else "container-store"
                self._record(param, kind, grad.size,
                             kernel_bytes(kind, grad.size, grad.dtype.itemsize, grad.dtype.itemsize),
                             seconds * grad.size / total, True)

    @contextlib.contextmanager
    def micro_batch(self) -> Iterator[PeakMemory]:
        """Measure the peak memory of one micro-batch's forward and backward (activations
        and temporaries), appended to ``activation_peaks``:

            with acc.micro_batch():
                acc.backward(loss_fn(model(xb), yb), num_items=len(yb))
        """
        with PeakMemory(self.device()) as probe:
            yield probe
        self.activation_peaks.append(probe.peak_bytes)

    # ----------------------------------------------------------- window end
    def _views(self) -> list[tuple[Param, Any]]:
        """(param, arena view) for every parameter written in this window, in model order."""
        assert self.arena is not None
        return [(p, self.arena.view(p)) for p in self._params if id(p) in self._written]

    def _finalize(self) -> None:
        """Close the window: fold compensation terms, settle the non-finite check, fix the scale."""
        if self._finalized:
            return
        scale = window_scale(self.reduction, self._micro_step, self._items)
        if self.fusion == "none":
            self._window = self.container.grads()
        elif self.compensation is not None:
            views = self._views()
            comps = [self.compensation.view(p) for p, _ in views]
            start = time.perf_counter()
            kernels.multi_add_scale([v for _, v in views], comps, 1.0)
            self._record_window_pass("fold_compensation", views, start)
        self._pending_scale = scale
        self._finalized = True

    def found_nonfinite(self) -> bool:
        """True when any gradient of this window was inf or nan (the step must be skipped).

        Closes the window, since the answer must cover every micro-batch of it."""
        if self._nonfinite is None:
            self._finalize()
            flagged = bool(int(self.flag[0]))
            if not flagged:
                # containers carry no flag, and GEMM-written views whose factor bound could not
                # rule out an overflow need a look; inf and nan are sticky under addition, so one
                # check of the summed arrays sees any micro-batch's
                if self.fusion == "none":
                    checked = list(self._window.items())
                else:
                    checked = [(p, v) for p, v in self._views() if not self._gemm_bound_is_safe(p, v)]
                if checked:
                    start = time.perf_counter()
                    flagged = not math.isfinite(kernels.multi_l2_norm([a for _, a in checked]))
                    self._record_window_pass("finite_check", checked, start)
            self._nonfinite = flagged
        return self._nonfinite

    def _gemm_bound_is_safe(self, param: Param, view: Any) -> bool:
        """True unless a GEMM wrote this view and its running bound could reach the dtype's maximum."""
        bound = self._gemm_bound.get(id(param))
        return bound is None or bound < float(np.finfo(view.dtype).max) / 4

    def gradient_window(self) -> GradientWindow:
        """The window for an optimizer: raw sums plus the one factor that normalizes them."""
        self._finalize()
        skip = self.found_nonfinite()
        assert self._pending_scale is not None
        if self.fusion == "none":
            arrays = {id(p): g for p, g in self._window.items()}
        else:
            arrays = {id(p): v for p, v in self._views()}
        return GradientWindow(arrays, grad_scale=self._pending_scale, skip=skip)

    def grads(self) -> Gradients:
        """The window's normalized gradients, as views into the arena (scaled in place).

        Closes the window: call ``zero()`` before the next micro-batch."""
        self._finalize()
        assert self._pending_scale is not None
        if self.fusion == "none":
            window = self._window
            if self._pending_scale != 1.0:
                for _, grad in window.items():
                    grad *= grad.dtype.type(self._pending_scale)
            self._pending_scale = 1.0
            return Gradients({id(p): (p, g) for p, g in window.items()})
        views = self._views()
        if self._pending_scale != 1.0:
            start = time.perf_counter()
            for buffer in self.arena.buffers.values():  # one pass over each flat buffer
                buffer *= buffer.dtype.type(self._pending_scale)
            self._record_window_pass("scale", views, start)
            self._pending_scale = 1.0
        return Gradients({id(p): (p, v) for p, v in views})

    def grad_norm(self) -> float:
        """Global L2 norm of the window's normalized gradient (one multi-tensor norm)."""
        self._finalize()
        assert self._pending_scale is not None
        arrays = list(self._window.values()) if self.fusion == "none" else [v for _, v in self._views()]
        raw = kernels.multi_l2_norm(arrays) if arrays else 0.0
        return raw * abs(self._pending_scale)

    def scale_window(self, factor: float) -> None:
        """Multiply the window's gradient by ``factor`` (clipping), folded into the final scale."""
        self._finalize()
        assert self._pending_scale is not None
        self._pending_scale *= factor

    def zero(self) -> None:
        """Start a new window. No memset: the next write to each view copies instead of adds."""
        if self._micro_step:
            nonfinite = self.found_nonfinite()
            if nonfinite:
                self.skipped_windows.append(self.window_index)
            if self.loss_scaler is not None:
                self.loss_scaler.update(nonfinite, self.window_index)
        self.flag[0] = 0
        if self.fusion == "none":
            self.container.grads()
        self.window_index += 1
        self._reset_window()

    # ------------------------------------------------------------ reporting
    def _record(self, param: Param, kernel: str, elements: int, nbytes: int, seconds: float,
                materialized: bool) -> None:
        assert self.trace is not None
        self.trace.record(KernelEvent(self.window_index, self._micro_step, self._names[id(param)], kernel,
                                      int(elements), int(nbytes), seconds, materialized))

    def _record_window_pass(self, kernel: str, views: list[tuple[Param, Any]], start: float) -> None:
        if self.trace is None:
            return
        seconds = time.perf_counter() - start
        total = sum(v.size for _, v in views) or 1
        for param, view in views:
            self.trace.record(KernelEvent(self.window_index, -1, self._names[id(param)], kernel, view.size,
                                          kernel_bytes(kernel, view.size, view.dtype.itemsize, view.dtype.itemsize),
                                          seconds * view.size / total, False))

    def memory_report(self, optimizer: Any = None) -> MemoryReport:
        """Parameters, arena, optimizer state and the last micro-batch's activation peak, in bytes."""
        arena = 0 if self.arena is None else self.arena.nbytes
        if self.compensation is not None:
            arena += self.compensation.nbytes
        state = array_bytes(getattr(optimizer, "state", {}))
        return MemoryReport(
            parameters=sum(int(p.data.nbytes) for p in self._params),
            arena=arena,
            optimizer_state=state,
            activations=self.activation_peaks[-1] if self.activation_peaks else 0,
        )

    # ----------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume mid-window: counters, which views hold data, the
        non-finite flag, the loss scale, and the buffers (or containers) themselves."""
        if self._finalized:
            raise RuntimeError("state_dict: the window is closed; save before grads()/the step, or after zero()")
        names = self._names
        state: dict[str, Any] = {
            "meta": {
                "steps": self.steps, "reduction": self.reduction, "fusion": self.fusion,
                "micro_step": self._micro_step, "items": self._items, "window_index": self.window_index,
                "written": [names[i] for i in sorted(self._written, key=self._order)],
                "gemm_bound": {names[i]: bound for i, bound in self._gemm_bound.items()},
                "flag": int(self.flag[0]),
                "skipped_windows": list(self.skipped_windows),
                "loss_scaler": None if self.loss_scaler is None else self.loss_scaler.state_dict(),
            },
            "arrays": {},
        }
        if self.arena is not None:
            state["arrays"].update({f"arena.{k}": v for k, v in self.arena.state_arrays().items()})
            if self.compensation is not None:
                state["arrays"].update({f"compensation.{k}": v for k, v in self.compensation.state_arrays().items()})
        else:
            partial = self.container.peek() or Gradients()
            state["arrays"].update({f"grad.{names[id(p)]}": np.array(p._backend.to_host(g), copy=True)
                                    for p, g in partial.items()})
        return state

    def _order(self, param_id: int) -> int:
        return next(i for i, p in enumerate(self._params) if id(p) == param_id)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` output into this accumulator (same model layout)."""
        meta, arrays = state["meta"], state["arrays"]
        if meta["fusion"] != self.fusion or (meta["fusion"] == "none") != (self.arena is None):
            raise ValueError(f"accumulator state was saved with fusion={meta['fusion']!r}, this one uses "
                             f"{self.fusion!r}")
        by_name = {n: p for p, n in ((p, self._names[id(p)]) for p in self._params)}
        unknown = [n for n in meta["written"] if n not in by_name]
        if unknown:
            raise ValueError(f"accumulator state names unknown parameters: {', '.join(unknown)}")
        if self.arena is not None:
            self.arena.load_state_arrays({k[6:]: v for k, v in arrays.items() if k.startswith("arena.")})
            if self.compensation is not None:
                self.compensation.load_state_arrays(
                    {k[13:]: v for k, v in arrays.items() if k.startswith("compensation.")})
        self._reset_window()
        if self.arena is None:
            partial = Gradients()
            for key, value in arrays.items():
                param = by_name[key[5:]]
                partial.set(param, param._backend.asarray(value))
            self.container = GradientsAccumulator()
            if len(partial):
                self.container.accumulate(self.model, partial)
        self.steps = int(meta["steps"])
        self.reduction = meta["reduction"]
        self._micro_step = int(meta["micro_step"])
        self._items = int(meta["items"])
        self.window_index = int(meta["window_index"])
        self._written = {id(by_name[n]) for n in meta["written"]}
        self._gemm_bound = {id(by_name[n]): float(bound) for n, bound in meta["gemm_bound"].items()}
        self.flag[0] = int(meta["flag"])
        self.skipped_windows = list(meta.get("skipped_windows", []))
        if self.loss_scaler is not None and meta.get("loss_scaler"):
            self.loss_scaler.load_state_dict(meta["loss_scaler"])

    def __repr__(self) -> str:
        return (f"Accumulator(steps={self.steps}, reduction={self.reduction!r}, fusion={self.fusion!r}, "
                f"micro_step={self._micro_step}, items_seen={self._items}, arena={self.arena!r})")
